-- A custom playbook, written the way you would write your own: trim the torch compile
-- caches of a user when they grow past a limit, keeping them aside for a day in case
-- the next run needs them.
--
--   runbook run examples/trim-caches.lua --dry-run                # what would happen
--   runbook run examples/trim-caches.lua --set limit_mib=500 --yes
--   runbook run examples/trim-caches.lua --set host=trainer --inventory examples/fleet/inventory.toml
runbook {
  name = "trim-caches",
  description = "Set aside torch compile caches that grew past a size limit",
  params = {
    host = { default = "local", help = "where: local, user@host, or an inventory name" },
    user = { default = "root", help = "whose caches" },
    limit_mib = { type = "integer", default = 2000, help = "caches bigger than this many MiB are set aside" },
  },
}

-- The stdlib: runbook.torch knows where torch keeps its caches (and reads the
-- TORCHINDUCTOR_CACHE_DIR / TORCH_EXTENSIONS_DIR / TRITON_CACHE_DIR overrides on the
-- target), runbook.text helps with command output.
local torch = require("runbook.torch")

-- target() contacts nothing yet: the first command does.
local box = target(params.host)

-- Values found in one step are kept in locals for the next ones.
local too_big = {}

step("measure", function()
  -- torch.caches runs a small read on the target, so it belongs inside a step.
  local caches = torch.caches(box, { user = params.user })
  -- cache.size is a read: it runs during --dry-run too, so the preview knows the sizes.
  for _, c in ipairs(cache.size(box, caches)) do
    local mib = c.bytes // (1024 * 1024) -- binary units, as runbook's own messages use
    if c.existed then log.info(("%s: %d MiB in %d files"):format(c.path, mib, c.files)) end
    if c.existed and mib > params.limit_mib then table.insert(too_big, c.path) end
  end
  if #too_big == 0 then log.info("nothing above " .. params.limit_mib .. " MiB") end
end)

-- `when` is evaluated just before the step: it sees what "measure" found.
step("set aside", {
  when = function()
    return #too_big > 0
  end,
}, function()
  -- keep = true moves each cache aside (cache.restore puts it back); the preview shows
  -- "move aside … (size, files)". cache.clear refuses anything outside the cache roots.
  cache.clear(box, too_big, { keep = true })
end)
