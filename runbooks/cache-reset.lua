-- cache-reset: clear the torch compile caches (inductor, extensions, triton) of a user,
-- kept aside by default so they can be put back; or put the newest kept copy back.
runbook {
  name = "cache-reset",
  description = "Clear (or restore) the torch compile caches on a host or container",
  params = {
    host = { default = "local", help = "local, user@host, or an inventory name" },
    ct = { type = "integer", help = "Proxmox container id on host" },
    user = { default = "root", help = "whose caches" },
    cache_dirs = {
      default = "",
      help = "cache dirs, space-separated (default: torch's own for user, resolved on the target)",
    },
    keep = { type = "boolean", default = true, help = "move the caches aside instead of deleting them" },
    keep_last = {
      type = "integer",
      default = 2,
      help = "with keep: how many kept copies of each cache remain (this one included); older ones are deleted",
    },
    restore = { type = "boolean", default = false, help = "put the newest kept copies back instead" },
    force = {
      type = "boolean",
      default = false,
      help = "clear even while a process has files open in them; restore over a non-empty dir",
    },
  },
}

local torch = require("runbook.torch")
local text = require("runbook.text")
local node = target(params.host)
local box = params.ct and node:pct(params.ct) or node
local caches = {} ---@type runbook.Paths

step("measure", function()
  if params.cache_dirs ~= "" then
    caches = text.split(params.cache_dirs)
  else
    caches = torch.caches(box, { user = params.user })
  end
  for _, c in ipairs(cache.size(box, caches)) do
    if c.existed then
      log.info(c.path .. ": " .. c.size)
    else
      log.info(c.path .. ": absent")
    end
  end
end)

step("clear", {
  when = function()
    return not params.restore
  end,
}, function()
  cache.clear(
    box,
    caches,
    { keep = params.keep, keep_last = params.keep and params.keep_last or nil, force = params.force }
  )
end)

step("restore", {
  when = function()
    return params.restore
  end,
}, function()
  cache.restore(box, caches, { force = params.force })
end)
