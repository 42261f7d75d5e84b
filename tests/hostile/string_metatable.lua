-- The string metatable is read-only: getmetatable("") gives a string, so its __index cannot be pointed anywhere.
runbook {
  name = "sandbox-string-metatable",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  local mt = getmetatable("")
  mt.__index = function(_, key) return rawget(_G, "io") or rawget(_G, key) end -- ESCAPE
  return ("/etc/passwd"):open("r")
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
