-- artifact.capture / artifact.restore / artifact.list on params.paths ("|"-separated),
-- on this machine or over ssh; each result is logged as one "result<TAB>key=value…"
-- line (tables flattened: key.torch=…, diff.1=…), for tests/artifact.rs to read back.
runbook {
  name = "artifact-test",
  params = {
    op = { choices = { "capture", "restore", "list" }, default = "capture" },
    paths = { default = "", help = "paths, separated by |" },
    name = { default = "test-cache" },
    torch = { default = "2.11.0+cu128", help = "the key's torch field (overrides what is read)" },
    require = { type = "boolean", default = false },
    store = { default = "" },
    target = { default = "local" },
    force = { type = "boolean", default = false },
  },
}
local text = require("runbook.text")
local t = target(params.target)

local function show(r)
  local flat = {}
  local function put(prefix, v)
    if type(v) == "table" then
      for k, x in pairs(v) do
        put(prefix .. "." .. tostring(k), x)
      end
    else
      flat[#flat + 1] = prefix .. "=" .. tostring(v)
    end
  end
  for k, v in pairs(r) do
    put(k, v)
  end
  table.sort(flat)
  log.info("result\t" .. table.concat(flat, "\t"))
end

step(params.op, function()
  local store = params.store ~= "" and params.store or nil
  local opts = {
    name = params.name,
    paths = text.split(params.paths, "|"),
    key = { torch = params.torch },
    store = store,
    force = params.force,
  }
  if params.op == "capture" then
    show(artifact.capture(t, opts))
  elseif params.op == "restore" then
    opts.require = params.require
    local r = artifact.restore(t, opts)
    r.diff_lines = {}
    for i, d in ipairs(r.diff) do
      r.diff_lines[i] = d.field .. ":" .. tostring(d.artifact) .. ">" .. tostring(d.here)
    end
    r.diff = nil
    show(r)
  else
    for _, a in ipairs(artifact.list(params.name, { store = store })) do
      show({ id = a.id, files = a.files, source = a.source })
    end
  end
end)
