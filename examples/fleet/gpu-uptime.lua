-- Fan-out over an inventory group: how long each node has been up, and what the
-- training container runs. Reads only, so it is safe to run anywhere:
--   runbook run examples/fleet/gpu-uptime.lua --inventory examples/fleet/inventory.toml
runbook {
  name = "gpu-uptime",
  description = "Uptime of every node in a group, and the OS of the training container",
  params = {
    group = { default = "nodes", help = "inventory group to visit" },
    container = { default = "trainer", help = "inventory name of the training container" },
  },
}

local text = require("runbook.text")

step("uptime everywhere", function()
  -- One connection per host; at most 8 hosts at a time. A host that is down fails its
  -- own line and the step, after the others finished.
  parallel(targets(params.group), function(t)
    local r = t:exec({ "uptime" }, { read_only = true, timeout = "20s" })
    log.info(t.name .. ": " .. text.trim(r.stdout))
  end, { limit = 8 })
end)

step("training container", function()
  local ct = target(params.container)
  -- Read as text, not sourced: a read runs no code runbook cannot see (`. FILE` would).
  local r = ct:exec({ "cat", "/etc/os-release" }, { read_only = true })
  local name = r.stdout:match('PRETTY_NAME="?([^"\n]*)') or "an unknown system"
  log.info(ct.name .. " runs " .. name)
end)
