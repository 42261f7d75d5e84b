-- Backstop: a __close added after setmetatable runs with the hook off when the timed-out step is unwound; the watchdog ends the run.
runbook {
  name = "sandbox-close-added-late-hook-off",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" }, t = { type = "string", default = "1s" } },
}
local here = target("local")
step("escape", { timeout = params.t }, function()
  local mt = {}
  local guard = setmetatable({}, mt)
  mt.__close = function() while true do end end
  local x <close> = guard
  while true do end -- ESCAPE
end)
step("after", function() here:exec({ "rm", "-f", "--", params.canary }) end)
