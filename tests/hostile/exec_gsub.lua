-- An exec in a string.gsub callback (cannot be suspended): a clear error at the line.
runbook {
  name = "sandbox-exec-gsub",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", function()
  ("x"):gsub(".", function() here:exec({ "true" }) end) -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
