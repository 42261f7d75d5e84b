-- The string metatable is reachable from Lua; pointing its __index somewhere finds no way out.
runbook {
  name = "sandbox-string-metatable",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  local mt = getmetatable("")
  mt.__index = function(_, key) return rawget(_G, "io") or rawget(_G, key) end
  return ("/etc/passwd"):open("r") -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
