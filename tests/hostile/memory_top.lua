-- A memory bomb at the top level stops loading (exit 2).
runbook {
  name = "sandbox-memory-top",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("first", function()
  -- Runs only if the file got past loading: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)

local s = string.rep("x", 2^30) -- ESCAPE
