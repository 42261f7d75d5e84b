-- A step that blocks in a shell with a background child, then an `always` step.
-- The test signals runbook once shell.pid exists.
runbook {
  name = "interrupt-mid-step",
  description = "A long step with a child process, a later step and an always step",
  params = { dir = { type = "path", required = true, help = "scratch dir for pid and marker files" } },
}

local here = target("local")

step("long", function()
  here:shell("sleep 1000 & echo $! > child.pid; echo $$ > shell.pid.tmp; mv shell.pid.tmp shell.pid; wait",
    { cwd = params.dir })
end)

step("later", function()
  here:exec({ "touch", params.dir .. "/later" })
end)

step("cleanup", { always = true }, function()
  here:exec({ "touch", params.dir .. "/always" })
end)
