-- Worked example from docs/authoring.md: set a cache directory aside (so a bad cache can
-- be put back), start an empty one, and prune old set-aside copies.
runbook {
  name = "cache-rotate",
  description = "Move a cache directory aside, start it empty, keep the last N copies",
  params = {
    cache = { type = "path", default = "/tmp/runbook-example-cache", help = "the cache directory" },
    keep = { type = "integer", default = 2, help = "how many set-aside copies to keep" },
  },
}

local text = require("runbook.text")
local here = target("local")
local pending = 0 -- in a dry-run: the copy this run would set aside, not there yet

step("measure", function()
  -- A read: it runs during --dry-run too, so the preview can say how big the cache is.
  local r = here:exec({ "du", "-sk", "--", params.cache }, { read_only = true, check = false })
  if r.code ~= 0 then
    log.info(params.cache .. " does not exist yet; it will be created empty")
  else
    log.info(("%s holds %s KiB"):format(params.cache, text.split(r.stdout)[1]))
  end
end)

step("set the cache aside", function()
  local probe = here:exec({ "test", "-d", params.cache }, { read_only = true, check = false })
  if probe.code == 0 then
    -- The time is read where and when the move runs: the command the plan shows is the
    -- very one that runs (a time read in an earlier step would differ at the real run).
    local mv = here:exec(
      { "sh", "-c", 'mv -T -- "$1" "$1.old-$(date +%Y%m%d-%H%M%S-%N)"', "sh", params.cache },
      { summary = "move " .. params.cache .. " aside to " .. params.cache .. ".old-<now>" }
    )
    if mv.planned then pending = 1 end
  end
  here:exec({ "mkdir", "-p", "--", params.cache })
end)

step("prune old copies", {
  when = function()
    return params.keep >= 0
  end,
}, function()
  local r = here:exec(
    { "sh", "-c", 'ls -1d -- "$1".old-* 2>/dev/null | sort -r', "sh", params.cache },
    { read_only = true, check = false }
  )
  local copies = text.lines(r.stdout) -- newest first
  -- The copy a dry-run only planned counts too, so it plans the deletions a real run makes.
  for i = params.keep + 1 - pending, #copies do
    here:exec({ "rm", "-rf", "--", copies[i] })
  end
  log.info(("%d set-aside copies, keeping %d"):format(#copies, math.min(#copies, params.keep)))
end)
