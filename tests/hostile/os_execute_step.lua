-- os.execute inside a step is refused before any step runs; the command never runs.
runbook {
  name = "sandbox-os-execute-step",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  os.execute("rm -f -- '" .. params.canary .. "'") -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
