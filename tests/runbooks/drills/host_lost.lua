-- Drill 1: the host dies while a step runs on it, then comes back and the run is resumed.
-- The "long" step waits for a `go` file that the drill creates only before resuming, so
-- the first run is always caught mid-command.
runbook {
  name = "drill-host-lost",
  description = "A remote step that loses its host mid-command; resumed once the host is back",
  params = {
    dir = { type = "path", required = true, help = "scratch dir, seen by this machine and the host" },
    host = { default = "node1", help = "ssh alias of the host" },
  },
}

local node = target(params.host)
local here = target("local")

step("prepare", function()
  node:exec({ "sh", "-c", 'echo prepared >> "$1/prepare.log"', "sh", params.dir })
end)

step("long", function()
  node:exec({ "sh", "-c", [[
echo $$ > "$1/long.pid.tmp" && mv "$1/long.pid.tmp" "$1/long.pid"
while [ ! -e "$1/go" ]; do sleep 0.1; done
echo done >> "$1/long.log"]], "sh", params.dir })
end)

step("after", function()
  node:exec({ "sh", "-c", 'echo after >> "$1/after.log"', "sh", params.dir })
end)

step("clean up", { always = true }, function()
  here:exec({ "sh", "-c", 'echo ran >> "$1/always.log"', "sh", params.dir })
end)
