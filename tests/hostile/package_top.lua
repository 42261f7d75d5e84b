-- The package library is absent at the top level too (exit 2).
runbook {
  name = "sandbox-package-top",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("first", function()
  -- Runs only if the file got past loading: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)

local open = package.loadlib("libc.so.6", "system") -- ESCAPE
