-- An exec inside coroutine.wrap: refused before the command starts.
runbook {
  name = "sandbox-exec-wrap",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", { timeout = "2s" }, function()
  coroutine.wrap(function() here:exec({ "sh", "-c", "sleep 4; rm -f -- \"$1\"", "sh", params.canary }) end)() -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
