-- warm-cache: run a warm-up single-threaded (TORCHINDUCTOR_COMPILE_THREADS=1) and check
-- that it filled the inductor cache.
runbook {
  name = "warm-cache",
  description = "Pre-warm the torch compile cache with a single-threaded warm-up and check it grew",
  params = {
    host   = { default = "local", help = "local, user@host, or an inventory name" },
    ct     = { type = "integer", help = "Proxmox container id on host" },
    user   = { default = "root", help = "whose cache" },
    venv   = { type = "path", required = true, help = "the venv to run the warm-up with" },
    script = { type = "path", required = true, help = "the warm-up script" },
    cwd    = { default = "", help = "working directory (default: the script's folder)" },
  },
}

local torch = require("runbook.torch")
local node = target(params.host)
local box = params.ct and node:pct(params.ct) or node

step("warm up", function()
  local caches = torch.caches(box, { user = params.user })
  local cwd = params.cwd ~= "" and params.cwd or params.script:match("^(.*)/[^/]*$") or "."
  local r = warmup.run(box, { venv = params.venv, script = params.script, cwd = cwd,
                              single_threaded = true, expect_cache = { caches.inductor } })
  for _, c in ipairs(r.caches or {}) do
    log.info(("%s: %d → %d files"):format(c.path, c.files_before or 0, c.files_after or 0))
  end
end)
