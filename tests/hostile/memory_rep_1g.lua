-- string.rep of 1 GiB hits the Lua memory limit.
runbook {
  name = "sandbox-memory-rep-1g",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function() -- ESCAPE (an allocation failure carries no position: the step is named)
  local s = string.rep("x", 2^30)
  here:exec({ "rm", "-f", "--", params.canary })
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
