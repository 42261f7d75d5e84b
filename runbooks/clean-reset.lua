-- clean-reset: the "clean reset then warm" recovery for a polluted training environment.
--
-- GPU health (a broken GPU stops everything: a clean reset will not fix it) →
-- fingerprint + drift → GPU preflight → stop the job → fresh venv → code back to the
-- known-good rev → the known-good compile cache put back where its key matches, else the
-- caches moved aside → single-threaded warm-up that must fill the cache → relaunch →
-- wait for the throughput line → capture the cache that passed → save the new known-good.
--
-- warm = "auto" (default): restore the newest known-good compile cache (artifact.restore)
-- whose key (torch, triton, CUDA, driver, GPU, python, platform, git HEAD, compile
-- settings) equals this target's, else compile as before, and once the throughput check
-- passes, capture the cache it compiled (with the throughput measured). "restore":
-- restore or fail. "compile": clear and compile, capture nothing.
--
-- Preview first:  runbook run clean-reset --dry-run --set host=root@pve1.example --set ct=200 …
runbook {
  name = "clean-reset",
  description = "Fresh venv, known-good code, the known-good compile cache restored (else cleared and re-warmed), relaunch, check throughput",
  params = {
    host = { default = "local", help = "where the training runs: local, user@host, or an inventory name" },
    ct = { type = "integer", help = "Proxmox container id on host (omit to work on host itself)" },
    user = { default = "root", help = "the user the training runs as (whose caches are cleared)" },
    cache_dirs = {
      default = "",
      help = "compile cache dirs, space-separated, the inductor cache first (default: torch's own for user, resolved on the target)",
    },
    venv = { type = "path", required = true, help = "the training venv, rebuilt fresh" },
    python = { default = "python3", help = "python for the venv: a version (3.12) or an interpreter" },
    torch = { default = "", help = "torch version to install, e.g. 2.11.0 (empty: no torch)" },
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
    repo = { type = "path", required = true, help = "the model code checkout" },
    code_paths = { default = "", help = "paths in the repo to restore, space-separated (empty: the whole tree)" },
    good_rev = { default = "HEAD", help = "the known-good git revision" },
    warmup = { type = "path", required = true, help = "warm-up script (relative to repo, or absolute)" },
    train = { required = true, help = "training script and its args (relative to repo), space-separated" },
    log = { type = "path", required = true, help = "where the training log goes" },
    pattern = { default = "([0-9.]+) Ktok/s", help = "regex for the throughput line; capture 1 is the number" },
    min_throughput = { type = "number", default = 0, help = "fail if the throughput is below this" },
    gpus = { type = "integer", default = 0, help = "GPUs that must be present and idle (0: skip the check)" },
    job = { default = "train", help = "name of the training job (to stop and relaunch it)" },
    known_good = {
      default = "clean-reset",
      help = "fingerprint name of the known-good environment (kept per machine)",
    },
    warm = {
      choices = { "auto", "restore", "compile" },
      default = "auto",
      help = "auto: restore the known-good compile cache where its key matches, else compile, and capture once the throughput check passes; restore: restore or fail; compile: clear and compile",
    },
    artifact = {
      default = "compile-cache",
      help = "artifact name of the known-good compile cache (warm-cache --set capture=true captures the same)",
    },
    store = {
      default = "",
      help = "artifact store: a directory, or ssh://HOST/DIR on a team file server (empty: the state dir's)",
    },
    wait = { default = "10m", help = "how long to wait for the throughput line" },
    ignore_health = {
      type = "boolean",
      default = false,
      help = "go on when a GPU is critical (gpu.health): its findings are still reported",
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

local function in_repo(p)
  if p:sub(1, 1) == "/" then return p end
  return params.repo .. "/" .. p
end

local caches = {} ---@type table<integer|string, string> the compile cache paths, as the target resolves them
local job_env = {} ---@type runbook.Env what the warm-up and the training see, so both use those caches
local cleared = false -- caches were moved aside: say how to restore them if we fail later
local finished = false
local offline = false -- --offline: nothing is read, so no key can be compared
local restored = nil ---@type string? the known-good artifact put back in place of the inductor cache
local measured = nil ---@type number? what the throughput check read
local captured = nil ---@type string? the artifact this run captured
local store = params.store ~= "" and params.store or nil

-- What the artifact's key is read with (torch and python from the venv, the git HEAD of
-- the code) and what it holds: the inductor cache, where inductor keeps its Triton
-- kernels too. The other caches are cleared as before.
local function artifact_opts()
  return { name = params.artifact, paths = { caches.inductor }, venv = params.venv, repo = params.repo, store = store }
end

-- Before anything changes: a GPU with a pending row remap or an Xid 79 is not fixed by a
-- fresh venv. A machine with no NVIDIA driver has nothing to check (a CPU test box).
step("GPU health", function()
  local h = gpu.health(box, { optional = true })
  if h.planned then return end
  for _, note in ipairs(h.notes) do
    log.info(note)
  end
  local critical = {}
  -- Each finding of a GPU (or of the node: nvidia-smi itself failing) as one line.
  local function report(label, findings)
    for _, f in ipairs(findings) do
      local line = label .. ": " .. f.detail .. " → " .. f.action
      if f.severity == "critical" then
        critical[#critical + 1] = line
      else
        log.warn(line)
      end
    end
  end
  for _, g in ipairs(h.gpus) do
    report(g.label, g.findings)
  end
  report(box.name, h.findings)
  if #critical == 0 then return end
  local why = table.concat(critical, "; ")
  if params.ignore_health then
    log.warn(why .. ": going on (ignore_health = true)")
  else
    fail(why .. ": a clean reset will not help (--set ignore_health=true goes on anyway)")
  end
end)

step("fingerprint and drift", function()
  -- Before the job is stopped: a restore that cannot happen must not cost the job. (Whether
  -- the key matches is known only once the venv is rebuilt.)
  if params.warm == "restore" and #artifact.list(params.artifact, { store = store }) == 0 then
    fail("warm = restore: there is no artifact '" .. params.artifact .. "' to restore (warm = auto compiles instead)")
  end
  -- Before the job is stopped, too: the new venv is built beside the old one.
  torch.venv_room(box, params.venv, { torch = params.torch ~= "", min_free_gb = params.min_free_gb })
  if params.cache_dirs ~= "" then
    local dirs = text.split(params.cache_dirs)
    caches = {}
    for i, d in ipairs(dirs) do
      caches[i] = d
      if i == 1 then caches.inductor = d end
    end
    job_env.TORCHINDUCTOR_CACHE_DIR = dirs[1]
  else
    caches = torch.caches(box, { user = params.user })
  end
  local now = fingerprint.take(box, { venv = params.venv, repo = params.repo, caches = caches })
  if now.planned then
    offline = true
    log.info("--offline: nothing is read, so the drift from the known-good is not known")
    return
  end
  local good = fingerprint.load(params.known_good, now)
  if not good then
    log.info("no known-good fingerprint '" .. params.known_good .. "' for this machine yet: this run will save one")
    return
  end
  if good.artifact then log.info("the known-good's compile cache is artifact " .. good.artifact) end
  local changes = fingerprint.diff(good, now)
  if #changes == 0 then log.info("nothing changed since the known-good environment") end
  for _, c in ipairs(changes) do
    log.warn(("drift: %s: %s -> %s"):format(c.what, tostring(c.before or "(none)"), tostring(c.after or "(none)")))
  end
end)

step("GPU preflight", {
  when = function()
    return params.gpus > 0
  end,
}, function()
  gpu.require(box, { count = params.gpus, idle = false })
end)

step("stop the training job", function()
  local r = proc.stop(box, { name = params.job, timeout = "60s" })
  -- Only a real run stopped anything: a dry-run's planned stop is in the preview already
  -- (with the pid when the job runs; --offline looks at nothing, so it has none).
  if r.was_running and not r.planned then
    local pid = r.pid and (" (pid " .. r.pid .. ")") or ""
    log.info("stopped " .. params.job .. pid .. (r.killed and ": it ignored SIGTERM, killed" or ""))
  end
end)

step("fresh venv", function()
  local packages = text.split(params.packages)
  local opts = { path = params.venv, python = params.python, fresh = true, install_uv = true }
  if params.torch ~= "" then
    table.insert(packages, 1, "torch==" .. params.torch)
    opts.verify = "import torch; print(torch.__version__, torch.version.cuda)"
  end
  opts.packages = packages
  -- A mirror serves every install, torch or not; PyTorch's index only one with torch.
  if params.torch ~= "" or params.index_url ~= "" then opts.index_url = index_url end
  if params.requirements ~= "" then opts.requirements = params.requirements end
  local r = venv.build(box, opts)
  if not r.planned then log.info(("venv %s: python %s, %d packages"):format(r.path, r.python, #r.packages)) end
end)

step("restore code to the known-good rev", function()
  local paths = nil
  if params.code_paths ~= "" then paths = text.split(params.code_paths) end
  local r = git.restore(box, { repo = params.repo, paths = paths, rev = params.good_rev })
  local rev = r.rev or params.good_rev
  if #rev == 40 and rev:match("^%x+$") then rev = rev:sub(1, 7) end -- as git shows it
  log.info(("%d file(s) %s to %s"):format(#r.files, r.planned and "will be restored" or "restored", rev))
end)

-- The cache paths in order, but `skip`.
---@param skip string?
---@return string[]
local function paths_but(skip)
  local out = {} ---@type string[]
  for i = 1, #caches do
    if caches[i] ~= skip then out[#out + 1] = caches[i] end
  end
  return out
end

step("restore or clear the compile caches (kept aside)", function()
  local clear = paths_but(nil)
  if params.warm ~= "compile" and offline then
    -- The key is read from the target, which --offline does not contact.
    if params.warm == "restore" then
      clear = paths_but(caches.inductor)
      log.info("warm = restore: --offline reads nothing, so the restore is decided in a run that reads the key")
    else
      log.info(
        "warm = auto: --offline reads nothing, so whether a known-good cache matches is not known: shown as compiling"
      )
    end
  elseif params.warm ~= "compile" then
    local opts = artifact_opts()
    opts.require = params.warm == "restore"
    local r = artifact.restore(box, opts)
    if r.restored then
      restored = r.id
      clear = paths_but(caches.inductor)
      log.info(
        ("warm = %s: restoring known-good artifact %s: the warm-up should find it warm"):format(params.warm, r.id)
      )
    else
      -- artifact.restore said why (no artifact, or the key fields that differ).
      log.info("warm = auto: no known-good compile cache to restore: clearing the caches and compiling")
    end
  else
    log.info("warm = compile: clearing the caches and compiling")
  end
  if #clear > 0 then cache.clear(box, clear, { keep = true }) end
  cleared = true
end)

step("single-threaded warm-up", function()
  warmup.run(box, {
    venv = params.venv,
    script = in_repo(params.warmup),
    cwd = params.repo,
    single_threaded = true,
    env = job_env,
    expect_cache = { caches.inductor },
  })
end)

step("relaunch training", function()
  local words = text.split(params.train)
  words[1] = in_repo(words[1])
  table.insert(words, 1, params.venv .. "/bin/python")
  proc.spawn(box, { cmd = words, log = params.log, cwd = params.repo, name = params.job, env = job_env })
end)

step("throughput check", function()
  local m = proc.wait_for(box, { file = params.log, pattern = params.pattern, timeout = params.wait })
  if m.planned then return end
  local got = tonumber(m[1])
  if not got then fail("the throughput line has no number: " .. m.line) end
  if got < params.min_throughput then
    fail(("throughput %.1f is below the minimum %.1f: %s"):format(got, params.min_throughput, m.line))
  end
  measured = got
  log.info(("throughput %.1f (minimum %.1f)"):format(got, params.min_throughput))
end)

step("capture the known-good compile cache", {
  when = function()
    return params.warm == "auto" and not restored
  end,
}, function()
  local opts = artifact_opts()
  opts.throughput = measured
  -- The relaunched job reads this cache now. Packing only reads it, and inductor writes
  -- each entry to a temp file and renames it, so no entry is caught half-written.
  opts.force = true
  local a = artifact.capture(box, opts)
  captured = a.id
end)

step("save the known-good fingerprint", function()
  local fp = fingerprint.take(box, { venv = params.venv, repo = params.repo, caches = caches })
  fp.artifact = captured or restored
  fingerprint.save(params.known_good, fp)
  finished = true
end)

step("how to undo", {
  always = true,
  when = function()
    return cleared and not finished
  end,
}, function()
  log.warn("the run stopped after the compile caches were moved aside; the old caches are kept next to them")
  log.warn("(restoring replaces whatever this run's warm-up wrote into those dirs)")
  local dirs = params.cache_dirs ~= "" and (" --set cache_dirs='" .. params.cache_dirs .. "'") or ""
  log.warn(
    "to put them back: runbook run cache-reset --set host="
      .. params.host
      .. (params.ct and (" --set ct=" .. params.ct) or "")
      .. " --set user="
      .. params.user
      .. dirs
      .. " --set restore=true --set force=true --yes"
  )
end)
