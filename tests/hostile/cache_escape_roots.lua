-- cache.clear of a root itself, of / and of a home directory: refused, nothing deleted.
runbook {
  name = "sandbox-cache-escape-roots",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  cache.clear(here, { "/tmp", "/", "~", "/root", "/etc" }) -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
