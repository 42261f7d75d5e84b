-- cache.clear / cache.restore / cache.size on the paths in params.paths ("|"-separated),
-- on this machine or in a container; each result is logged (see show.lua).
runbook {
  name = "cache-clear",
  cache_roots = { "~/declared" },
  params = {
    paths = { required = true, help = "paths, separated by |" },
    op = { choices = { "clear", "restore", "size" }, default = "clear" },
    keep = { type = "boolean", default = false },
    keep_last = { type = "integer", default = -1, help = "passed on when 0 or more" },
    force = { type = "boolean", default = false },
    target = { default = "local" },
    ct = { type = "integer", default = 0 },
  },
}
local text = require("runbook.text")
local show = require("show")
local t = target(params.target)
if params.ct > 0 then t = t:pct(params.ct) end

step(params.op, function()
  local paths = text.split(params.paths, "|")
  local results
  if params.op == "clear" then
    local keep_last = params.keep_last >= 0 and params.keep_last or nil
    results = cache.clear(t, paths, { keep = params.keep, keep_last = keep_last, force = params.force })
  elseif params.op == "restore" then
    results = cache.restore(t, paths, { force = params.force })
  else
    results = cache.size(t, paths)
  end
  for _, r in ipairs(results) do show(r) end
end)
