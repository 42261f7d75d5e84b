-- string.dump (the way to make bytecode) is refused.
runbook {
  name = "sandbox-string-dump",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  local code = string.dump(function() return 1 end) -- ESCAPE
  here:exec({ "rm", "-f", "--", params.canary })
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
