-- gpu-health: what the GPUs of a host or container report, and whether enough are there
-- and idle. Reads only.
runbook {
  name = "gpu-health",
  description = "List GPUs (memory, utilisation, temperature, processes) and check count and idleness",
  params = {
    host = { default = "local", help = "local, user@host, or an inventory name" },
    ct = { type = "integer", help = "Proxmox container id on host" },
    count = { type = "integer", default = 0, help = "GPUs that must be present (0: any)" },
    idle = { type = "boolean", default = false, help = "require every GPU to run no compute process" },
  },
}

local node = target(params.host)
local box = params.ct and node:pct(params.ct) or node

step("probe", function()
  local gpus = gpu.probe(box)
  if #gpus == 0 and not gpus.planned then log.warn("no GPUs found on " .. box.name) end
  for _, g in ipairs(gpus) do
    log.info(
      ("GPU %d %s: %s/%s MiB, %s%% busy, %s°C, %d process(es)"):format(
        g.index,
        g.name,
        tostring(g.memory_used_mib),
        tostring(g.memory_total_mib),
        tostring(g.utilization_pct),
        tostring(g.temperature_c),
        #g.processes
      )
    )
  end
end)

step("requirements", {
  when = function()
    return params.count > 0 or params.idle
  end,
}, function()
  gpu.require(box, { count = params.count, idle = params.idle })
end)
