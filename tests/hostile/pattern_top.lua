-- One long call into C at the top level (a backtracking pattern): the watchdog ends the load.
runbook {
  name = "sandbox-pattern-top",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
local s = string.rep("a", 30000)
local found = s:find(".-.-.-.-.-.-b") -- ESCAPE
step("escape", function() end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
