-- load() of a bytecode string ("\27Lua…") is refused.
runbook {
  name = "sandbox-load-bytecode",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  local chunk = "\27Lua\84\0\25\147\13\10\26\10" -- a Lua 5.4 bytecode header
  local f = load(chunk, "evil", "b") -- ESCAPE
  f()
  here:exec({ "rm", "-f", "--", params.canary })
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
