-- Drill 2: SIGINT/SIGTERM while a step runs a process tree on a remote host, or inside a
-- container on it. The drill signals runbook once shell.pid exists in `piddir` (as the
-- remote side sees it: the scratch dir over SSH, /root inside the container).
runbook {
  name = "drill-signal-remote",
  description = "A long remote step with a child process, a later step and an always step",
  params = {
    dir = { type = "path", required = true, help = "local scratch dir for markers" },
    piddir = { type = "path", required = true, help = "where the remote side writes its pids" },
    host = { default = "node1", help = "ssh alias of the host" },
    ctid = { type = "integer", default = 0, help = "container on the host (0: the host itself)" },
  },
}

local remote = target(params.host)
if params.ctid ~= 0 then remote = remote:pct(params.ctid) end
local here = target("local")

step("long", function()
  remote:exec({ "sh", "-c", [[
sleep 307 & echo $! > "$1/child.pid"
echo $$ > "$1/shell.pid.tmp" && mv "$1/shell.pid.tmp" "$1/shell.pid"
wait]], "sh", params.piddir })
end)

step("later", function()
  here:exec({ "touch", params.dir .. "/later" })
end)

step("clean up", { always = true }, function()
  here:exec({ "touch", params.dir .. "/always" })
end)
