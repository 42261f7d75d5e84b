-- require() of anything that is not the stdlib or a Lua file inside the runbook's folder fails.
runbook {
  name = "sandbox-require-blocked",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = {
    canary = { type = "path", required = true, help = "a file that must stay as it is" },
    module = { required = true, help = "the module name to require" },
  },
}
local here = target("local")

step("escape", function()
  local m = require(params.module) -- ESCAPE
  -- Only reached if require handed out the module.
  here:exec({ "rm", "-f", "--", params.canary })
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
