-- The removed globals stay out of reach at run time too, when the name is computed and
-- no static check can see it: _G[name] fails with the reason the name is gone.
runbook {
  name = "sandbox-dynamic-global",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = {
    canary = { type = "path", required = true, help = "a file that must stay as it is" },
    name = { required = true, help = "the global to look up" },
  },
}
local here = target("local")

step("escape", function()
  local lib = _G[params.name] -- ESCAPE
  -- Only reached if the lookup handed something out.
  here:exec({ "rm", "-f", "--", params.canary })
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
