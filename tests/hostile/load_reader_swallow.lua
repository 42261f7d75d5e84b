-- load with a reader function turns the reader's timeout into (nil, msg): the step still times out.
runbook {
  name = "sandbox-load-reader",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", { timeout = "1s" }, function()
  load(function() while true do end end) -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
