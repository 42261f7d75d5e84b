-- A pattern match that backtracks for ages (one long C call) still ends at the step's timeout.
runbook {
  name = "sandbox-pattern-backtrack",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", { timeout = "1s" }, function() -- ESCAPE
  local s = string.rep("a", 20000)
  s:find(".-.-.-b")
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
