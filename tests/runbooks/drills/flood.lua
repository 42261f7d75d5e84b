-- Drill 4: a remote command that prints `rate` numbered lines per second for `seconds`
-- seconds, in batches every 200 ms, paced against the clock so it does not drift.
runbook {
  name = "drill-flood",
  description = "A remote command with a sustained flood of output lines",
  params = {
    host = { default = "node1", help = "ssh alias of the host" },
    seconds = { type = "integer", default = 60, help = "how long the flood lasts" },
    rate = { type = "integer", default = 5000, help = "lines per second (a multiple of 5)" },
  },
}

local FLOOD = [[
per=$1; batches=$2; start=$(date +%s%N); b=0
while [ "$b" -lt "$batches" ]; do
  seq -f "line %.0f of the flood 0123456789abcdefghijklmnopqrstuvwxyz" $((b * per + 1)) $((b * per + per))
  b=$((b + 1))
  left=$((start + b * 200000000 - $(date +%s%N)))
  if [ "$left" -gt 0 ]; then sleep "0.$(printf %09d "$left")"; fi
done]]

local node = target(params.host)

step("flood", function()
  local per = params.rate // 5
  local r = node:exec({ "sh", "-c", FLOOD, "sh", tostring(per), tostring(params.seconds * 5) },
    { read_only = true })
  log.info(string.format("captured %d bytes of stdout%s", #r.stdout,
    r.truncated and " (truncated)" or ""))
end)
