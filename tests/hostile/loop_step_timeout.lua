-- An endless loop ends at the step's timeout.
runbook {
  name = "sandbox-loop-step-timeout",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", { timeout = "1s" }, function()
  while true do end -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
