-- An exec in a table.sort comparator (cannot be suspended): a clear error at the line.
runbook {
  name = "sandbox-exec-sort",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", function()
  table.sort({ 3, 1, 2 }, function(a, b) here:exec({ "true" }) return a < b end) -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
