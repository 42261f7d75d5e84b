-- gpu-health: whether the GPUs of a host or container are sound, in NVIDIA's own terms,
-- and whether enough are there and idle. Reads only.
--
-- One line per GPU: its verdict and, for each finding, what was seen and the recovery
-- (NVML's vocabulary: none, restart_app, gpu_reset, drain_and_reset, node_reboot,
-- contact_support). Fails when a GPU is critical: a clean reset will not fix it.
runbook {
  name = "gpu-health",
  description = "GPU health (ECC, row remaps, clocks, PCIe, temperature, Xids, DCGM) and what each GPU reports; fails on a critical GPU",
  params = {
    host = { default = "local", help = "local, user@host, or an inventory name" },
    ct = { type = "integer", help = "Proxmox container id on host" },
    count = { type = "integer", default = 0, help = "GPUs that must be present (0: any)" },
    idle = { type = "boolean", default = false, help = "require every GPU to run no compute process" },
    since = { default = "", help = "only Xids logged this long ago or later count, e.g. 24h (empty: since boot)" },
    dcgm = { type = "integer", default = 0, help = "also run DCGM's diagnostic at this level, 1 to 3 (0: no)" },
  },
}

local node = target(params.host)
local box = params.ct and node:pct(params.ct) or node

-- A value the GPU does not report is nil: say so, not "nil".
local function shown(v, unit)
  if v == nil then return "n/a" end
  return tostring(v) .. (unit or "")
end

step("probe", function()
  local gpus = gpu.probe(box)
  if #gpus == 0 and not gpus.planned then log.warn("no GPUs found on " .. box.name) end
  for _, g in ipairs(gpus) do
    log.info(
      ("GPU %s %s: %s/%s MiB, %s busy, %s, %d process(es)"):format(
        shown(g.index),
        shown(g.name),
        shown(g.memory_used_mib),
        shown(g.memory_total_mib),
        shown(g.utilization_pct, "%"),
        shown(g.temperature_c, "°C"),
        #g.processes
      )
    )
  end
end)

step("health", function()
  local h = gpu.health(box, {
    since = params.since ~= "" and params.since or nil,
    dcgm = params.dcgm > 0 and params.dcgm or nil,
  })
  if h.planned then return end
  for _, note in ipairs(h.notes) do
    log.warn(note)
  end
  local critical = {}
  local function report(label, name, verdict, findings)
    local title = name and (label .. " " .. name) or label
    if #findings == 0 then
      log.info(title .. ": ok")
      return
    end
    local parts = {}
    for _, f in ipairs(findings) do
      parts[#parts + 1] = f.detail .. " → " .. f.action
      if f.severity == "critical" then critical[#critical + 1] = label .. ": " .. f.detail .. " → " .. f.action end
    end
    local line = ("%s: %s: %s"):format(title, verdict, table.concat(parts, "; "))
    if verdict == "ok" then
      log.info(line)
    else
      log.warn(line)
    end
  end
  for _, g in ipairs(h.gpus) do
    report(g.label, g.name, g.verdict, g.findings)
  end
  if #h.findings > 0 then report(box.name, nil, h.verdict, h.findings) end
  if h.dcgm then log.info(("DCGM level %d: %s"):format(h.dcgm.level, h.dcgm.passed and "passed" or "not passed")) end
  if #critical > 0 then fail(table.concat(critical, "; ")) end
end)

step("requirements", {
  when = function()
    return params.count > 0 or params.idle
  end,
}, function()
  gpu.require(box, { count = params.count, idle = params.idle })
end)
