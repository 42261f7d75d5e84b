-- Removing the strict-globals metatable and clobbering string functions reaches nothing dangerous.
runbook {
  name = "sandbox-tamper",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

local text = require("runbook.text")

-- Take off what plain Lua lets a script take off: the metatable on _G, and every
-- string function (also as seen through the string metatable).
setmetatable(_G, nil)
local real = {}
for name, f in pairs(string) do real[name] = f end
for name in pairs(real) do
  string[name] = function(...) return real[name](...) end
end
-- The string metatable is read-only: what getmetatable gives is a string, not the table.
assert(type(getmetatable("")) == "string", "the string metatable is hidden")
string.dump = nil

step("escape", function()
  -- The stdlib and the engine still work...
  log.info("trimmed:", text.trim("  ok  "))
  -- ...and nothing dangerous is anywhere to be found.
  for _, name in ipairs({ "io", "os", "debug", "package", "dofile", "loadfile" }) do
    if rawget(_G, name) ~= nil then fail("global " .. name .. " is reachable") end
  end
  if ("x").dump ~= nil or rawget(real, "dump") == nil then fail("string.dump changed") end
  if pcall(real.dump, function() end) then fail("the saved string.dump made bytecode") end
  if pcall(load, "\27Lua\84\0") then fail("load took bytecode") end
  -- (Through _G: a bare `io` would already be refused when the file loads.)
  local f = _G.io.open(params.canary, "w") -- ESCAPE
  f:write("escaped\n")
  f:close()
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
