-- runbook.torch: the cache paths seen on a target (logged), then optionally cleared.
runbook {
  name = "cache-torch",
  params = {
    user = { default = "", help = "empty: the user commands run as" },
    build = { default = "cu128" },
    clear = { type = "boolean", default = false },
    target = { default = "local" },
    ct = { type = "integer", default = 0 },
  },
}
local torch = require("runbook.torch")
local show = require("show")
local t = target(params.target)
if params.ct > 0 then t = t:pct(params.ct) end

step("torch caches", function()
  local c = torch.caches(t, params.user ~= "" and { user = params.user } or nil)
  log.info(("caches\t%s\t%s\t%s\t%d"):format(c.inductor, c.extensions, c.triton, #c))
  log.info("index\t" .. torch.index(params.build))
  if params.clear then
    for _, r in ipairs(cache.clear(t, c)) do show(r) end
  end
end)
