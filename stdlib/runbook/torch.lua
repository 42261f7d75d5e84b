-- runbook.torch: where PyTorch keeps its compile caches, and which wheel index to install it from.
--   local torch = require("runbook.torch")
--   step("clear", function() cache.clear(box, torch.caches(box, { user = "root" })) end)
local torch = {}

---@class runbook.TorchCaches
---@field [integer] string inductor, extensions, triton, in that order
---@field inductor string torch inductor's cache (TORCHINDUCTOR_CACHE_DIR)
---@field extensions string torch's C++/CUDA extensions (TORCH_EXTENSIONS_DIR)
---@field triton string triton's kernel cache (TRITON_CACHE_DIR)

-- Prints the three cache directories for user $1 (default: the user commands run as),
-- one a line (inductor, extensions, triton), the way torch and triton choose them: an
-- environment variable wins, else a default under the temp dir or the home. The home is
-- $HOME for the user commands run as, else the user's passwd entry.
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
]]

-- The defaults, for when nothing could be looked at (--dry-run --offline).
local function defaults(user)
  local home = user == "root" and "/root" or "/home/" .. user
  return "/tmp/torchinductor_" .. user, home .. "/.cache/torch_extensions", home .. "/.triton/cache"
end

-- Raises `msg` at the line that called torch.<fn>, without this file's own location.
---@return never
local function fail(fn, msg)
  msg = tostring(msg):gsub("^<stdlib>/runbook/torch%.lua:%d+: ", "")
  error(("torch.%s: %s"):format(fn, msg), 3)
end

--- Cache directories of torch on target t, as seen there, for opts.user (default: the user commands run as on t): a list { inductor, extensions, triton } whose entries are also named (.inductor, .extensions, .triton), ready for cache.clear. Honours TORCHINDUCTOR_CACHE_DIR (else $TMPDIR or /tmp, then torchinductor_USER), TORCH_EXTENSIONS_DIR (else $XDG_CACHE_HOME or ~/.cache, then torch_extensions) and TRITON_CACHE_DIR (else $TRITON_HOME or ~, then .triton/cache) in t's environment. It runs a read command on t, so call it inside a step; with --dry-run --offline it gives the defaults (home /root for root, else /home/USER).
---@param t runbook.Target
---@param opts? { user?: string }
---@return runbook.TorchCaches
function torch.caches(t, opts)
  if type(t) ~= "userdata" then
    fail("caches", ('the first argument is a target, e.g. torch.caches(target("local")); got %s'):format(type(t)))
  end
  opts = opts or {}
  if type(opts) ~= "table" then fail("caches", 'opts must be a table like { user = "root" }') end
  for k in pairs(opts) do
    if k ~= "user" then fail("caches", ("unknown option '%s'; known: user"):format(tostring(k))) end
  end
  local user = opts.user
  if user ~= nil and (type(user) ~= "string" or not user:match("^[%a_][%w_.-]*$")) then
    fail("caches", ('user must be a user name like "root", got %q'):format(tostring(user)))
  end
  local ok, r = pcall(
    t.exec,
    t,
    { "sh", "-c", CACHES, "sh", user or "" },
    { read_only = true, summary = "where torch keeps its caches for " .. (user or "the current user") }
  )
  if not ok then fail("caches", r) end
  local inductor, extensions, triton = r.stdout:match("^([^\n]*)\n([^\n]*)\n([^\n]*)\n$")
  if r.planned then
    inductor, extensions, triton = defaults(user or "root")
  elseif not inductor then
    fail("caches", "unexpected answer from " .. t.name .. ": " .. r.stdout)
  end
  ---@cast inductor string
  ---@cast extensions string
  ---@cast triton string
  return { inductor, extensions, triton, inductor = inductor, extensions = extensions, triton = triton }
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

return torch
