-- A misspelt global is an error naming it, with a suggestion (exit 2 at the top level).
runbook {
  name = "sandbox-unknown-global-top",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("first", function()
  -- Runs only if the file got past loading: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)

local t = targt("local") -- ESCAPE
