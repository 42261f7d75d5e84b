-- A coroutine.wrap loop inside pcall cannot swallow the step timeout.
runbook {
  name = "sandbox-coroutine-wrap",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", { timeout = "1s" }, function()
  while true do
    pcall(coroutine.wrap(function() while true do coroutine.yield() end end)) -- ESCAPE
  end
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
