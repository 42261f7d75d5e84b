-- Endless recursion through a metamethod (the C stack) is a clean error.
runbook {
  name = "sandbox-recursion-metamethod",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  local t = setmetatable({}, { __index = function(t, k) return t[k] end }) -- ESCAPE
  local v = t.anything
  here:exec({ "rm", "-f", "--", params.canary })
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
