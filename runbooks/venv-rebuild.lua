-- venv-rebuild: build a venv fresh with uv beside the old one, verify it, swap it in.
-- A failed build or verify leaves the old venv as it was.
runbook {
  name = "venv-rebuild",
  description = "Rebuild a Python venv fresh with uv (torch wheels from the right index), verify, swap",
  params = {
    host = { default = "local", help = "local, user@host, or an inventory name" },
    ct = { type = "integer", help = "Proxmox container id on host" },
    venv = { type = "path", required = true, help = "the venv to rebuild" },
    python = { default = "python3", help = "a version (3.12) or an interpreter" },
    torch = { default = "", help = "torch version, e.g. 2.11.0 (empty: no torch)" },
    cuda = {
      default = "cu128",
      help = "torch wheel index: a CUDA build (cu128, cu126…) or cpu from download.pytorch.org, or pypi (the default index, no --index-url)",
    },
    index_url = {
      default = "",
      help = "a package index mirror, e.g. https://pypi.mirror.example/simple: every package comes from it (wins over cuda)",
    },
    packages = { default = "", help = "more packages, space-separated" },
    min_free_gb = {
      type = "number",
      help = "GB that must be free where the new venv is built, checked before anything changes (default: 7 with torch, a cu128 venv is ~6 GB; 1 without)",
    },
    requirements = { default = "", help = "a requirements file on the target" },
    verify = {
      default = "",
      help = "python code that must run in the new venv (default: import torch when torch is set)",
    },
  },
}

local text = require("runbook.text")
local torch = require("runbook.torch")
-- Checked here, before any step runs: a typo in the index must not cost a stopped job.
-- nil is the installer's default index (cuda = "pypi").
local index_url = torch.index(params.cuda, params.index_url)
local node = target(params.host)
local box = params.ct and node:pct(params.ct) or node

step("build and swap", function()
  local packages = text.split(params.packages)
  local opts = { path = params.venv, python = params.python, fresh = true }
  if params.torch ~= "" then
    table.insert(packages, 1, "torch==" .. params.torch)
    opts.verify = "import torch; print(torch.__version__, torch.version.cuda)"
  end
  if params.verify ~= "" then opts.verify = params.verify end
  -- A mirror serves every install, torch or not; PyTorch's index only one with torch.
  if params.torch ~= "" or params.index_url ~= "" then opts.index_url = index_url end
  if params.requirements ~= "" then opts.requirements = params.requirements end
  opts.packages = packages
  -- The new venv is built beside the old one: refuse now if the disk cannot hold it.
  torch.venv_room(box, params.venv, { torch = params.torch ~= "", min_free_gb = params.min_free_gb })
  local r = venv.build(box, opts)
  if not r.planned then
    log.info(
      ("%s: python %s, %d packages, hash %s"):format(r.path, tostring(r.python), #r.packages, (r.hash or ""):sub(1, 12))
    )
  end
end)
