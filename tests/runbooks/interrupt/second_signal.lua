-- The first signal stops "long"; the `always` step then blocks in `sleep 1000`, and a
-- second signal must stop it too.
runbook {
  name = "interrupt-second-signal",
  description = "An always step that blocks, stopped by a second signal",
  params = { dir = { type = "path", required = true, help = "scratch dir for pid files" } },
}

local here = target("local")

step("long", function()
  here:shell("echo $$ > first.pid.tmp; mv first.pid.tmp first.pid; exec sleep 1000", { cwd = params.dir })
end)

step("cleanup", { always = true }, function()
  here:shell("echo $$ > always.pid.tmp; mv always.pid.tmp always.pid; exec sleep 1000", { cwd = params.dir })
end)
