-- venv-rebuild: build a venv fresh with uv beside the old one, verify it, swap it in.
-- A failed build or verify leaves the old venv as it was.
runbook {
  name = "venv-rebuild",
  description = "Rebuild a Python venv fresh with uv (torch wheels from the right index), verify, swap",
  params = {
    host         = { default = "local", help = "local, user@host, or an inventory name" },
    ct           = { type = "integer", help = "Proxmox container id on host" },
    venv         = { type = "path", required = true, help = "the venv to rebuild" },
    python       = { default = "python3", help = "a version (3.12) or an interpreter" },
    torch        = { default = "", help = "torch version, e.g. 2.11.0 (empty: no torch)" },
    cuda         = { default = "cu128", help = "torch wheel flavour: cu128, cu126, cpu…" },
    packages     = { default = "", help = "more packages, space-separated" },
    requirements = { default = "", help = "a requirements file on the target" },
    verify       = { default = "", help = "python code that must run in the new venv (default: import torch when torch is set)" },
  },
}

local text = require("runbook.text")
local torch = require("runbook.torch")
local node = target(params.host)
local box = params.ct and node:pct(params.ct) or node

step("build and swap", function()
  local packages = text.split(params.packages)
  local opts = { path = params.venv, python = params.python, fresh = true }
  if params.torch ~= "" then
    table.insert(packages, 1, "torch==" .. params.torch)
    opts.index_url = torch.index(params.cuda)
    opts.verify = "import torch; print(torch.__version__, torch.version.cuda)"
  end
  if params.verify ~= "" then opts.verify = params.verify end
  if params.requirements ~= "" then opts.requirements = params.requirements end
  opts.packages = packages
  local r = venv.build(box, opts)
  if not r.planned then
    log.info(("%s: python %s, %d packages, hash %s"):format(r.path, r.python, #r.packages, r.hash:sub(1, 12)))
  end
end)
