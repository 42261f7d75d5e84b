-- `--timeout 1s` stops the long step, skips the next one, and still runs `always`.
runbook {
  name = "interrupt-run-timeout",
  description = "A run that outlives its --timeout",
  params = { dir = { type = "path", required = true, help = "scratch dir for pid and marker files" } },
}

local here = target("local")

step("long", function()
  here:shell("echo $$ > sleep.pid; exec sleep 30", { cwd = params.dir })
end)

step("later", function()
  here:exec({ "touch", params.dir .. "/later" })
end)

step("cleanup", { always = true }, function()
  here:exec({ "touch", params.dir .. "/always" })
end)
