-- runbook.torch: where PyTorch keeps its compile caches, which wheel index to install it
-- from, and its compile cache kept and put back (files, or torch's own Mega-Cache).
--   local torch = require("runbook.torch")
--   step("clear", function() cache.clear(box, torch.caches(box, { user = "root" })) end)
--   step("restore", function() torch.restore(box, { name = "dflash", venv = "/opt/venv" }) end)
--   step("warm", function() torch.warmup(box, { venv = "/opt/venv", script = "w.py", expect_cache = "hit" }) end)
local torch = {}

---@class runbook.TorchCaches
---@field [integer] string inductor, extensions, triton, in that order
---@field inductor string torch inductor's cache (TORCHINDUCTOR_CACHE_DIR)
---@field extensions string torch's C++/CUDA extensions (TORCH_EXTENSIONS_DIR)
---@field triton string triton's kernel cache (TRITON_CACHE_DIR)

-- Prints the three cache directories for user $1 (default: the user commands run as),
-- one a line (inductor, extensions, triton), the way torch and triton choose them: an
-- environment variable wins, else a default under the temp dir or the home. The home is
-- $HOME for the user commands run as, else the user's passwd entry. A fourth line is
-- runbook's own folder for Mega-Cache files, in the home's .cache (a cache root, and no
-- world-writable dir where a name could be taken first).
local CACHES = [[
user=${1:-$(id -un)}
if [ "$user" = "$(id -un 2>/dev/null)" ] && [ -n "$HOME" ]; then home=$HOME
else home=$(getent passwd "$user" 2>/dev/null | cut -d: -f6); fi
if [ -z "$home" ]; then
  if [ "$user" = root ]; then home=/root; else home=/home/$user; fi
fi
printf '%s\n' "${TORCHINDUCTOR_CACHE_DIR:-${TMPDIR:-/tmp}/torchinductor_$user}"
printf '%s\n' "${TORCH_EXTENSIONS_DIR:-${XDG_CACHE_HOME:-$home/.cache}/torch_extensions}"
printf '%s\n' "${TRITON_CACHE_DIR:-${TRITON_HOME:-$home}/.triton/cache}"
printf '%s\n' "$home/.cache/runbook-megacache"
]]

-- The defaults, for when nothing could be looked at (--dry-run --offline).
local function defaults(user)
  local home = user == "root" and "/root" or "/home/" .. user
  return "/tmp/torchinductor_" .. user,
    home .. "/.cache/torch_extensions",
    home .. "/.triton/cache",
    home .. "/.cache/runbook-megacache"
end

-- Raises `msg` as torch.<fn>'s error. An error caught from a call (a target that cannot
-- be reached) loses what wraps it: "runtime error: ", its own FILE:LINE, its traceback.
-- Where it is raised from, runbook names the runbook's line that called torch.<fn>.
-- `level` is error()'s: 3 (the default) from torch.<fn> itself, one more for each helper
-- between it and fail.
---@param level? integer
---@return never
local function fail(fn, msg, level)
  msg = tostring(msg):gsub("\nstack traceback:.*$", ""):gsub("^runtime error: ", ""):gsub("^[^\n:]+:%d+: ", "")
  error(("torch.%s: %s"):format(fn, msg), level or 3)
end

-- (inductor, extensions, triton, runbook's Mega-Cache folder) on t, for torch.caches and
-- the Mega-Cache functions. The last is no entry of torch.caches' table: that table is
-- a list of paths (cache.clear, cache.size), and a named field outside it is refused.
---@param fn string
---@param t runbook.Target
---@param opts? { user?: string }
---@param level integer fail's level: 4 from torch.<fn>, 5 from a helper of it
---@return string, string, string, string
local function read_caches(fn, t, opts, level)
  if type(t) ~= "userdata" then
    fail(fn, ('the first argument is a target, e.g. torch.%s(target("local"), …); got %s'):format(fn, type(t)), level)
  end
  opts = opts or {}
  if type(opts) ~= "table" then fail(fn, 'opts must be a table like { user = "root" }', level) end
  for k in pairs(opts) do
    if k ~= "user" then fail(fn, ("unknown option '%s'; known: user"):format(tostring(k)), level) end
  end
  local user = opts.user
  if user ~= nil and (type(user) ~= "string" or not user:match("^[%a_][%w_.-]*$")) then
    fail(fn, ('user must be a user name like "root", got %q'):format(tostring(user)), level)
  end
  local ok, r = pcall(
    t.exec,
    t,
    { "sh", "-c", CACHES, "sh", user or "" },
    { read_only = true, summary = "where torch keeps its caches for " .. (user or "the current user") }
  )
  if not ok then fail(fn, r, level) end
  local inductor, extensions, triton, mega = r.stdout:match("^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n$")
  if r.planned then
    inductor, extensions, triton, mega = defaults(user or "root")
  elseif not inductor then
    fail(fn, "unexpected answer from " .. t.name .. ": " .. r.stdout, level)
  end
  ---@cast inductor string
  ---@cast extensions string
  ---@cast triton string
  ---@cast mega string
  return inductor, extensions, triton, mega
end

--- Cache directories of torch on target t, as seen there, for opts.user (default: the user commands run as on t): a list { inductor, extensions, triton } whose entries are also named (.inductor, .extensions, .triton), ready for cache.clear. Honours TORCHINDUCTOR_CACHE_DIR (else $TMPDIR or /tmp, then torchinductor_USER), TORCH_EXTENSIONS_DIR (else $XDG_CACHE_HOME or ~/.cache, then torch_extensions) and TRITON_CACHE_DIR (else $TRITON_HOME or ~, then .triton/cache) in t's environment. It runs a read command on t, so call it inside a step; with --dry-run --offline it gives the defaults (home /root for root, else /home/USER).
---@param t runbook.Target
---@param opts? { user?: string }
---@return runbook.TorchCaches
function torch.caches(t, opts)
  local inductor, extensions, triton = read_caches("caches", t, opts, 4)
  return { inductor, extensions, triton, inductor = inductor, extensions = extensions, triton = triton }
end

-- What a fresh venv needs free beside the old one: a torch cu128 venv is ~6 GB (torch
-- and its CUDA wheels unpacked), so 7 leaves room; without torch, 1.
local VENV_GB = { torch = 7, plain = 1 }

--- Refuses, before anything changes, a venv that the disk cannot hold: disk.free(t, dir) on the directory the venv is built in (the parent of `venv`, where venv.build makes the new one beside the old), and fails the step unless it has opts.min_free_gb GB free (default 7 when opts.torch is set, as a torch cu128 venv is ~6 GB; else 1). The message names the target, the directory, what is free and what is needed. Returns disk.free's result; with --dry-run --offline nothing is measured (`planned = true`). Call it inside a step.
---@param t runbook.Target
---@param venv string
---@param opts? { torch?: boolean, min_free_gb?: number }
---@return runbook.DiskFree
function torch.venv_room(t, venv, opts)
  opts = opts or {}
  local dir = venv:match("^(.+)/[^/]+/*$") or venv
  local d = disk.free(t, dir)
  if d.planned then return d end
  local need_gb = opts.min_free_gb or (opts.torch and VENV_GB.torch or VENV_GB.plain)
  local free_gb = assert(d.bytes_free) / 1024 ^ 3
  if free_gb < need_gb then
    fail(
      "venv_room",
      ("%s: %.1f GB free under %s, a new venv at %s needs %g GB (%s); free some space or set min_free_gb"):format(
        t.name,
        free_gb,
        d.path,
        venv,
        need_gb,
        opts.torch and "torch cu128 is ~6 GB" or "no torch"
      )
    )
  end
  return d
end

-- A CUDA build name as PyTorch's index spells it, "cpu", or "pypi".
local function build_ok(b)
  return b == "cpu" or b == "pypi" or b:match("^cu%d%d%d$") ~= nil
end

--- The wheel index to install torch from, for venv.build's index_url (uv pip install --index-url): index_url when given (a mirror; it wins), else PyTorch's index for the build cuda ("cu128" → https://download.pytorch.org/whl/cu128, "cpu" → …/whl/cpu), or nil for "pypi": no --index-url, the installer's default index (PyPI, unless uv is configured otherwise), whose torch is that release's default CUDA build (2.11.0 is +cu130). index_url must be an http://, https:// or file:// URL without credentials (they would show in every preview and run record: put them in ~/.netrc on the target). Both are checked, cuda too when index_url wins; pure, so a runbook can call it at the top level, before any step runs.
---@param cuda string
---@param index_url? string
---@return string?
function torch.index(cuda, index_url)
  if type(cuda) ~= "string" or not build_ok(cuda) then
    fail(
      "index",
      ('cuda: give a CUDA build like "cu128" (cu + 3 digits), "cpu", or "pypi" (the default index, no --index-url), got %s'):format(
        type(cuda) == "string" and ("%q"):format(cuda) or type(cuda)
      )
    )
  end
  if index_url == nil or index_url == "" then
    if cuda == "pypi" then return nil end
    return "https://download.pytorch.org/whl/" .. cuda
  end
  if type(index_url) ~= "string" then fail("index", "index_url must be a URL string, got " .. type(index_url)) end
  -- Before anything echoes the URL: an error message is a sink like any other.
  local authority = index_url:match("^%a[%w+.-]*://([^/?#]*)") or index_url:match("^[^/?#]*") or ""
  if authority:find("@", 1, true) then
    fail(
      "index",
      "index_url carries credentials (user:password@host): they would show in every "
        .. "preview, log and run record; give the URL without them and put them in ~/.netrc on the target"
    )
  end
  local scheme, rest = index_url:match("^(%a[%w+.-]*)://(.*)$")
  local web = scheme == "https" or scheme == "http"
  local ok = web and (authority:match("^[%w.-]+$") or authority:match("^[%w.-]+:%d+$")) ~= nil
    or scheme == "file" and (rest or ""):sub(1, 1) == "/"
  if not ok or index_url:find("[%s%c]") then
    fail(
      "index",
      (
        "index_url must be an http://, https:// or file:/// URL of a package index, "
        .. 'e.g. "https://pypi.mirror.example/simple", got %q'
      ):format(index_url)
    )
  end
  return index_url
end

-- A copy of opts without the keys in `drop`, checked to be a table.
local function without(fn, opts, drop)
  if type(opts) ~= "table" then fail(fn, 'opts must be a table, e.g. { name = "dflash", venv = "/opt/venv" }', 4) end
  local out = {}
  for k, v in pairs(opts) do
    if not drop[k] then out[k] = v end
  end
  return out
end

local function target_ok(fn, t)
  if type(t) ~= "userdata" then
    fail(fn, ('the first argument is a target, e.g. torch.%s(target("local"), { … }); got %s'):format(fn, type(t)), 4)
  end
end

local function name_ok(fn, what, name)
  if type(name) ~= "string" or not name:match("^[%w_.-]+$") or name:sub(1, 1) == "." then
    fail(fn, ("%s must be a name (letters, digits, -, _, .), got %s"):format(what, tostring(name)), 4)
  end
end

---@type table<string, boolean>
local MODES = { auto = true, mega = true, files = true }
local function mode_of(fn, mode)
  if mode == nil then return "auto" end
  if not MODES[mode] then fail(fn, ('mode is "auto", "mega" or "files", got %s'):format(tostring(mode)), 4) end
  return mode
end

-- The Mega-Cache file of artifact `name` on t, and its folder (what artifact packs).
local function mega_file(t, name)
  local _, _, _, root = read_caches("megacache", t, nil, 5)
  local dir = root .. "/" .. name
  return dir .. "/megacache.bin", dir
end

--- torch.compile's warm-up with proof: warmup.run(t, opts) with torch_report = true, so the script runs under runbook's wrapper and the result's `torch.counters` are inductor's own hit/miss counters (fxgraph_cache_hit, fxgraph_cache_miss, fxgraph_cache_bypass, autograd_cache_hit, …), and with expect_cache = "hit" the graphs compiled are counted by them (a warning `the restored cache missed: 3 graphs compiled`; on_miss = "fail" fails the step). opts are warmup.run's, plus `mega = NAME`: as the script exits, torch's Mega-Cache (torch.compiler.save_cache_artifacts(), torch 2.7 or later) is saved to ~/.cache/runbook-megacache/NAME/megacache.bin (the home of the user commands run as on t), for torch.capture; the result's torch.mega says what was saved, or why nothing was (an older torch). Call it inside a step.
---@param t runbook.Target
---@param opts runbook.WarmupRunOptions|{ mega?: string }
---@return runbook.WarmupResult
function torch.warmup(t, opts)
  target_ok("warmup", t)
  local o = without("warmup", opts, { mega = true }) ---@type runbook.WarmupRunOptions
  if opts.mega ~= nil then
    name_ok("warmup", "mega", opts.mega)
    if o.mega_save ~= nil then fail("warmup", "give mega or mega_save, not both") end
    o.mega_save = (mega_file(t, opts.mega))
  end
  if o.torch_report == nil then o.torch_report = true end
  local ok, r = pcall(warmup.run, t, o)
  if not ok then fail("warmup", r) end
  return r
end

---@class runbook.TorchCaptured: runbook.ArtifactCaptured
---@field mode "mega"|"files" the mode used

---@class runbook.TorchRestored: runbook.ArtifactRestored
---@field mode "mega"|"files" the mode restored, or tried last
---@field loaded? table<string, integer> Mega-Cache artifacts loaded, by kind (inductor, aot_autograd, …)
---@field mega_reason? string why auto fell back to the files

-- Whether the Mega-Cache file of `name` is on t (a read: it runs in a dry-run too).
local function mega_saved(t, file)
  local r = t:exec(
    { "test", "-s", file },
    { read_only = true, check = false, summary = "is there a Mega-Cache file at " .. file }
  )
  return r.planned or r.code == 0
end

-- artifact's options from torch's: the same names, `name` and `paths` as given.
local function artifact_opts(opts, name, paths, with_require)
  local o = {
    name = name,
    paths = paths,
    key = opts.key,
    venv = opts.venv,
    python = opts.python,
    repo = opts.repo,
    store = opts.store,
    force = opts.force,
  }
  if with_require then o.require = opts.require end
  return o
end

---@type table<string, boolean>
local KNOWN = {
  name = true,
  mode = true,
  paths = true,
  key = true,
  venv = true,
  python = true,
  repo = true,
  store = true,
  force = true,
}
local function known_only(fn, opts, extra)
  for k in pairs(opts) do
    if not KNOWN[k] and not extra[k] then
      local names = {}
      for n in pairs(KNOWN) do
        names[#names + 1] = n
      end
      for n in pairs(extra) do
        names[#names + 1] = n
      end
      table.sort(names)
      fail(fn, ("unknown option '%s'; known: %s"):format(tostring(k), table.concat(names, ", ")), 4)
    end
  end
end

--- Keeps torch's compile cache on t in the artifact store, as artifact.capture does (the same key: torch with its build tag, triton, CUDA, driver, GPU, python, platform, the git HEAD of `repo`, the compile-relevant environment; `key` adds fields). mode "mega": the Mega-Cache file a torch.warmup(t, { mega = name }) saved, as artifact `NAME.mega` (torch 2.7 or later; it holds what that warm-up compiled or loaded, not the whole cache, and no Triton cubins: see docs/authoring.md). mode "files": the cache directories `paths` (default: torch.caches(t).inductor), as artifact `NAME`. mode "auto" (default): "mega" when that file is there, else "files". Options: name (required), mode, paths, key, venv, python, repo, store, force (as artifact.capture's). Returns artifact.capture's result with `mode`, the mode used. Call it inside a step.
---@param t runbook.Target
---@param opts { name: string, mode?: "auto"|"mega"|"files", paths?: runbook.Paths, key?: table<string, string>, venv?: string, python?: string, repo?: string, store?: string, force?: boolean }
---@return runbook.TorchCaptured
function torch.capture(t, opts)
  target_ok("capture", t)
  if type(opts) ~= "table" then
    fail("capture", 'opts must be a table, e.g. { name = "dflash", venv = "/opt/venv" }')
  end
  known_only("capture", opts, {})
  name_ok("capture", "name", opts.name)
  local mode = mode_of("capture", opts.mode)
  local ok, r = pcall(function()
    if mode ~= "files" then
      local file, dir = mega_file(t, opts.name)
      if mega_saved(t, file) then
        local a = artifact.capture(t, artifact_opts(opts, opts.name .. ".mega", { dir }))
        ---@cast a runbook.TorchCaptured
        a.mode = "mega"
        return a
      elseif mode == "mega" then
        error(
          ("no Mega-Cache file at %s on %s: run torch.warmup(t, { mega = %q, … }) first (torch 2.7 or later)"):format(
            file,
            t.name,
            opts.name
          ),
          0
        )
      end
      log.info(("torch.capture: no Mega-Cache file at %s on %s: capturing the cache files"):format(file, t.name))
    end
    local a = artifact.capture(t, artifact_opts(opts, opts.name, opts.paths or { torch.caches(t).inductor }))
    ---@cast a runbook.TorchCaptured
    a.mode = "files"
    return a
  end)
  if not ok then fail("capture", r) end
  return r
end

-- Loads a Mega-Cache file into torch's caches on disk, as that python's torch places
-- them (its TORCHINDUCTOR_CACHE_DIR from env); prints `loaded KIND N` per kind.
local LOAD = [=[
import sys
import torch

load = getattr(getattr(torch, "compiler", None), "load_cache_artifacts", None)
if load is None:
    sys.exit("torch %s has no torch.compiler.load_cache_artifacts (Mega-Cache needs torch 2.7 or later)" % torch.__version__)
with open(sys.argv[1], "rb") as f:
    info = load(f.read())
if info is None:
    sys.exit("torch.compiler.load_cache_artifacts refused %s (written by another torch?)" % sys.argv[1])
for kind, names in sorted(info.artifacts.items()):
    print("loaded", kind, len(names))
]=]

local function python_of(opts)
  if opts.venv ~= nil then return (opts.venv:gsub("/+$", "")) .. "/bin/python" end
  return opts.python or "python3"
end

--- Puts torch's compile cache back on t from the artifact store, where the key read on t now matches (as artifact.restore: the newest match; a mismatch restores nothing and says why field by field; require = true fails the step instead). mode "mega": artifact `NAME.mega`'s Mega-Cache file back to ~/.cache/runbook-megacache/NAME, then loaded into torch's caches with torch.compiler.load_cache_artifacts() by `venv`'s (or `python`'s) torch, with `env` (give the warm-up's TORCHINDUCTOR_CACHE_DIR there, so it lands where training looks). mode "files": the directories `paths` (default: torch.caches(t).inductor) from artifact `NAME`. mode "auto" (default): "mega" when a Mega-Cache artifact matches, else "files". Options: name (required), mode, paths, key, venv, python, repo, store, force, require (as artifact.restore's), env. Returns artifact.restore's result with `mode` (the mode restored, or tried last) and, for "mega", `loaded` (artifacts by kind, as torch counted them) and `mega_reason` (why auto fell back to files). Call it inside a step; then torch.warmup(t, { expect_cache = "hit", … }) proves it.
---@param t runbook.Target
---@param opts { name: string, mode?: "auto"|"mega"|"files", paths?: runbook.Paths, key?: table<string, string>, venv?: string, python?: string, repo?: string, store?: string, force?: boolean, require?: boolean, env?: table<string, string> }
---@return runbook.TorchRestored
function torch.restore(t, opts)
  target_ok("restore", t)
  if type(opts) ~= "table" then
    fail("restore", 'opts must be a table, e.g. { name = "dflash", venv = "/opt/venv" }')
  end
  known_only("restore", opts, { require = true, env = true })
  name_ok("restore", "name", opts.name)
  local mode = mode_of("restore", opts.mode)
  if opts.venv ~= nil and opts.python ~= nil then fail("restore", "give venv or python, not both") end
  local ok, r = pcall(function()
    local mega_reason
    -- auto skips mega without a change (the mkdir) when the store has no Mega-Cache artifact.
    if mode == "auto" and #artifact.list(opts.name .. ".mega", { store = opts.store }) == 0 then
      mega_reason = "no artifact '" .. opts.name .. ".mega' in the store"
      mode = "files"
    end
    if mode ~= "files" then
      local file, dir = mega_file(t, opts.name)
      local root = dir:match("^(.*)/[^/]+$")
      -- artifact.restore puts a directory back inside an existing one.
      t:exec({ "mkdir", "-p", "-m", "700", "--", root }, { summary = "make " .. root .. " for Mega-Cache files" })
      local a = artifact.restore(t, artifact_opts(opts, opts.name .. ".mega", { dir }, mode == "mega"))
      ---@cast a runbook.TorchRestored
      a.mode = "mega"
      if a.restored and not a.planned then
        local l = t:exec({ python_of(opts), "-c", LOAD, file }, {
          env = opts.env,
          summary = "load the Mega-Cache " .. file .. " into torch's caches",
        })
        a.loaded = {}
        for kind, n in l.stdout:gmatch("loaded ([%w_]+) (%d+)") do
          a.loaded[kind] = tonumber(n)
        end
      end
      if a.restored or mode == "mega" then return a end
      mega_reason = a.reason
      log.info(
        "torch.restore: no Mega-Cache artifact to restore (" .. tostring(a.reason) .. "): trying the cache files"
      )
    end
    local a = artifact.restore(t, artifact_opts(opts, opts.name, opts.paths or { torch.caches(t).inductor }, true))
    ---@cast a runbook.TorchRestored
    a.mode = "files"
    a.mega_reason = mega_reason
    return a
  end)
  if not ok then fail("restore", r) end
  return r
end

return torch
