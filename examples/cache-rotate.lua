-- Worked example from docs/authoring.md: set a cache directory aside (so a bad cache can
-- be put back), start an empty one, and prune old set-aside copies.
runbook {
  name = "cache-rotate",
  description = "Move a cache directory aside, start it empty, keep the last N copies",
  params = {
    cache = { type = "path", default = "/tmp/runbook-example-cache", help = "the cache directory" },
    keep  = { type = "integer", default = 2, help = "how many set-aside copies to keep" },
  },
}

local text = require("runbook.text")
local here = target("local")
local stamp = nil

step("measure", function()
  -- A read: it runs during --dry-run too, so the preview can say how big the cache is.
  local r = here:exec({ "du", "-sk", "--", params.cache }, { read_only = true, check = false })
  if r.code ~= 0 then
    log.info(params.cache .. " does not exist yet; it will be created empty")
  else
    log.info(("%s holds %s KiB"):format(params.cache, text.split(r.stdout)[1]))
  end
  stamp = text.trim(here:exec({ "date", "+%Y%m%d-%H%M%S-%N" }, { read_only = true }).stdout)
end)

step("set the cache aside", function()
  local probe = here:exec({ "test", "-d", params.cache }, { read_only = true, check = false })
  if probe.code == 0 then
    here:exec({ "mv", "-T", "--", params.cache, params.cache .. ".old-" .. stamp })
  end
  here:exec({ "mkdir", "-p", "--", params.cache })
end)

step("prune old copies", { when = function() return params.keep >= 0 end }, function()
  local r = here:exec({ "sh", "-c", 'ls -1d -- "$1".old-* 2>/dev/null | sort -r', "sh", params.cache },
                      { read_only = true, check = false })
  local copies = text.lines(r.stdout)
  for i = params.keep + 1, #copies do
    here:exec({ "rm", "-rf", "--", copies[i] })
  end
  log.info(("%d set-aside copies, keeping %d"):format(#copies, math.min(#copies, params.keep)))
end)
