-- A finalizer that would only run when the VM closes, after run_finished: refused where it is set.
runbook {
  name = "sandbox-gc-vmclose",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
KEEP = setmetatable({}, { __gc = function() while true do end end }) -- ESCAPE
step("escape", function() end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
