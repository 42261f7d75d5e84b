-- An exec in a tail call inside coroutine.wrap: the coroutine's own stack holds no runbook
-- line, so the refusal names the line that resumed it.
runbook {
  name = "sandbox-exec-wrap-tail",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", { timeout = "2s" }, function()
  local run = coroutine.wrap(function() return here:exec({ "sh", "-c", "sleep 4; rm -f -- \"$1\"", "sh", params.canary }) end)
  run() -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
