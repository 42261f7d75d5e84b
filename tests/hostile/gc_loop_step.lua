-- A __gc finalizer set inside a step is refused.
runbook {
  name = "sandbox-gc-step",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", { timeout = "1s" }, function()
  setmetatable({}, { __gc = function() while true do end end }) -- ESCAPE
  collectgarbage()
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
