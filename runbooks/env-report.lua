-- Shipped with runbook: `runbook run env-report`. Only reads: safe to run anywhere.
runbook {
  name = "env-report",
  description = "Report what an ML box looks like: python, GPUs, disk, compile-cache sizes (reads only)",
  params = {
    python = { type = "string", default = "python3", help = "the python to ask" },
    user = { type = "string", default = "root", help = "whose torch caches to measure" },
  },
}

local text = require("runbook.text")
local torch = require("runbook.torch")
local here = target("local")

local function probe(argv)
  return here:exec(argv, { read_only = true, check = false, timeout = "20s" })
end

step("python", function()
  local r = probe({ params.python, "-c", "import sys; print(sys.version.split()[0])" })
  log.info("python: " .. (r.code == 0 and text.trim(r.stdout) or "not found (" .. params.python .. ")"))
end)

step("gpus", function()
  local r = probe({ "sh", "-c", "command -v nvidia-smi >/dev/null && nvidia-smi -L" })
  if r.code ~= 0 then
    log.info("gpus: no nvidia-smi on this machine")
    return
  end
  for _, line in ipairs(text.lines(r.stdout)) do
    log.info(line)
  end
end)

step("disk", function()
  local r = probe({ "df", "-Pk", "/tmp" })
  local rows = text.lines(r.stdout)
  if r.code == 0 and rows[2] then
    local f = text.split(rows[2])
    log.info(("/tmp: %d MiB free of %d MiB"):format(tonumber(f[4]) // 1024, tonumber(f[2]) // 1024))
  end
end)

step("compile caches", function()
  -- Where torch itself would put them for that user (its environment variables included),
  -- as cache-reset finds them; cache.size, not du: the size every primitive reports.
  local dirs = torch.caches(here, { user = params.user })
  for _, c in ipairs(cache.size(here, dirs)) do
    if c.existed then
      log.info(c.path .. ": " .. c.size)
    else
      log.info(c.path .. ": absent")
    end
  end
end)
