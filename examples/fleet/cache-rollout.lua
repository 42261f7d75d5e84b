-- Roll the known-good compile cache out to a fleet: capture it once on the node where it
-- was warmed (and worked), then restore it on every node of a group at once, instead of
-- each node compiling its own. Each node reads its own key (torch with its build tag,
-- triton, CUDA, driver, GPU model and compute capability, python, platform, git HEAD)
-- and compares it with the artifact's: a node with another GPU model is refused and
-- keeps its cache, the others get the known-good one (theirs kept aside). One line per
-- node at the end.
--   runbook run examples/fleet/cache-rollout.lua --inventory examples/fleet/inventory.toml \
--     --set source=pve1 --set venv=/opt/venv --set repo=/root/dflash --dry-run
-- A dry-run decides each node against the newest artifact stored now (the capture is
-- only planned); --set capture=false rolls out what is stored, exactly as previewed.
runbook {
  name = "cache-rollout",
  description = "Capture the compile cache on one node, restore it on every node whose key matches",
  params = {
    source = {
      default = "pve1",
      help = "the node whose warmed cache is the known-good: an inventory name or user@host",
    },
    group = { default = "nodes", help = "inventory group to restore on" },
    nodes = { default = "", help = "targets to restore on instead of group, space-separated" },
    cache = {
      default = "/tmp/torchinductor_root",
      help = "the inductor cache directory, the same path on every node (~ is each node's home)",
    },
    venv = { type = "path", required = true, help = "the training venv on every node (the key's python and torch)" },
    repo = { default = "", help = "the model code checkout on every node, whose git HEAD is part of the key" },
    artifact = { default = "compile-cache", help = "the artifact's name" },
    capture = {
      type = "boolean",
      default = true,
      help = "capture on source first (false: roll out the newest artifact already stored)",
    },
    store = {
      default = "",
      help = "artifact store: a directory, or ssh://HOST/DIR on a team file server (empty: the state dir's)",
    },
    limit = { type = "integer", default = 8, help = "how many nodes are restored at a time" },
  },
}

local text = require("runbook.text")

-- The same on every node, so every node's key is read the same way and the artifact's
-- paths match.
local function artifact_opts()
  return {
    name = params.artifact,
    paths = { params.cache },
    venv = params.venv,
    repo = params.repo ~= "" and params.repo or nil,
    store = params.store ~= "" and params.store or nil,
  }
end

step("capture on the source", {
  when = function()
    return params.capture
  end,
}, function()
  artifact.capture(target(params.source), artifact_opts())
end)

step("restore on every node", function()
  local nodes = {} ---@type runbook.Target[]
  if params.nodes ~= "" then
    for _, n in ipairs(text.split(params.nodes)) do
      nodes[#nodes + 1] = target(n)
    end
  else
    nodes = targets(params.group)
  end
  local source = params.capture and target(params.source).name or nil
  -- Each node compares its own key; a refusal is that node's answer, not a failure: it
  -- keeps its cache and compiles its own.
  local outcomes = parallel(nodes, function(t)
    if t.name == source then return { ok = true, line = t.name .. ": the source, left as it is" } end
    local r = artifact.restore(t, artifact_opts())
    if r.restored then return { ok = true, restored = true, line = t.name .. ": restored artifact " .. r.id } end
    return { ok = false, line = t.name .. ": not restored: " .. r.reason }
  end, { limit = params.limit })
  local restored, refused = 0, 0
  for _, o in ipairs(outcomes) do
    if o.ok then
      log.info(o.line)
    else
      log.warn(o.line)
      refused = refused + 1
    end
    if o.restored then restored = restored + 1 end
  end
  log.info(
    ("%d node(s) restored, %d not (their key differs or no artifact matches: they compile their own)"):format(
      restored,
      refused
    )
  )
end)
