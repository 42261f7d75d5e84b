-- A __close handler added to a metatable after setmetatable checked it: the step timeout still ends the step.
runbook {
  name = "sandbox-close-added-late",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", { timeout = "1s" }, function()
  -- The handler is added after setmetatable checked the metatable.
  local mt = {}
  local guard = setmetatable({}, mt)
  mt.__close = function() while true do end end
  local co = coroutine.create(function()
    local x <close> = guard
    coroutine.yield()
  end)
  coroutine.resume(co)
  while true do end -- ESCAPE
  coroutine.close(co)
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
