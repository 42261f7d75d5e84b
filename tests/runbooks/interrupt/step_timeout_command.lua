-- A step timeout covers the commands it runs.
runbook {
  name = "interrupt-step-timeout-command",
  description = "A step whose command outlives the step timeout",
  params = { dir = { type = "path", required = true, help = "scratch dir for the pid file" } },
}

local here = target("local")

step("sleepy", { timeout = "500ms" }, function()
  here:shell("echo $$ > sleep.pid; exec sleep 30", { cwd = params.dir })
end)
