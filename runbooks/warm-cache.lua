-- warm-cache: run a warm-up single-threaded (TORCHINDUCTOR_COMPILE_THREADS=1) and check
-- that the inductor cache is full afterwards: it grew, or was already warm (a warm-up on
-- a warm cache compiles nothing new). It fails when the cache is empty. With
-- capture = true the cache it leaves is kept as a known-good artifact (artifact.capture),
-- which clean-reset's warm = "auto" | "restore" puts back where the key matches: give it
-- the venv and repo clean-reset gets, since the key is read from them.
runbook {
  name = "warm-cache",
  description = "Pre-warm the torch compile cache with a single-threaded warm-up and check it is full",
  params = {
    host = { default = "local", help = "local, user@host, or an inventory name" },
    ct = { type = "integer", help = "Proxmox container id on host" },
    user = { default = "root", help = "whose cache" },
    venv = { type = "path", required = true, help = "the venv to run the warm-up with" },
    script = {
      type = "path",
      required = true,
      help = "the warm-up script (relative: to where runbook runs, or to cwd when given)",
    },
    cwd = { default = "", help = "working directory (default: the script's folder)" },
    cache_dirs = {
      default = "",
      help = "compile cache dirs, space-separated, the inductor cache first (default: torch's own for user, resolved on the target)",
    },
    capture = {
      type = "boolean",
      default = false,
      help = "keep the warmed inductor cache as a known-good artifact, for clean-reset to restore",
    },
    artifact = { default = "compile-cache", help = "the artifact's name (clean-reset's artifact param)" },
    repo = { default = "", help = "the model code checkout, whose git HEAD is part of the artifact's key" },
    store = {
      default = "",
      help = "artifact store: a directory, or ssh://HOST/DIR on a team file server (empty: the state dir's)",
    },
  },
}

local torch = require("runbook.torch")
local text = require("runbook.text")
local node = target(params.host)
local box = params.ct and node:pct(params.ct) or node
local inductor = nil ---@type string? the inductor cache the warm-up fills

step("warm up", function()
  local env = {} ---@type runbook.Env
  if params.cache_dirs ~= "" then
    -- The warm-up must fill the cache the user named: point torch at it.
    inductor = text.split(params.cache_dirs)[1]
    env.TORCHINDUCTOR_CACHE_DIR = inductor
  else
    inductor = torch.caches(box, { user = params.user }).inductor
  end
  -- Without a cwd the script runs in its own folder, where its path is its name (a
  -- relative path would otherwise be taken from that folder a second time).
  local script, cwd = params.script, params.cwd
  if cwd == "" then
    local dir, name = params.script:match("^(.*)/([^/]*)$")
    if dir then
      cwd, script = dir ~= "" and dir or "/", name
    else
      cwd = "."
    end
  end
  local r = warmup.run(box, {
    venv = params.venv,
    script = script,
    cwd = cwd,
    env = env,
    single_threaded = true,
    expect_cache = { inductor },
  })
  -- A real run's warmup.run says how each cache came out itself; a dry-run says where
  -- it starts from.
  if r.planned then
    for _, c in ipairs(r.caches or {}) do
      log.info(("%s: %d files now; the warm-up runs in a real run"):format(c.path, c.files_before or 0))
    end
  end
end)

step("capture the warmed cache", {
  when = function()
    return params.capture
  end,
}, function()
  ---@cast inductor string
  artifact.capture(box, {
    name = params.artifact,
    paths = { inductor },
    venv = params.venv,
    repo = params.repo ~= "" and params.repo or nil,
    store = params.store ~= "" and params.store or nil,
  })
end)
