-- A __close handler would run with the hook off once a coroutine the hook aborted is closed: setmetatable refuses it.
runbook {
  name = "sandbox-close-handler",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", { timeout = "1s" }, function()
  local guard = setmetatable({}, { __close = function() while true do end end }) -- ESCAPE
  local co = coroutine.create(function()
    local x <close> = guard
    while true do end
  end)
  coroutine.resume(co)
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
