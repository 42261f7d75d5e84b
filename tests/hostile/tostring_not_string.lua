-- A __tostring that returns a table: the error names the runbook line.
runbook {
  name = "sandbox-tostring-type",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", function()
  tostring(setmetatable({}, { __tostring = function() return {} end })) -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
