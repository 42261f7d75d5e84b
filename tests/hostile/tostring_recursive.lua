-- A __tostring that calls tostring on itself: "C stack overflow" names the runbook line.
runbook {
  name = "sandbox-tostring-recursive",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", function()
  local t = setmetatable({}, { __tostring = function(s) return tostring(s) end })
  tostring(t) -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
