-- cache.clear of paths that climb out of the cache roots: refused, nothing deleted.
runbook {
  name = "sandbox-cache-escape-dotdot",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  local dir = params.canary:match("^(.*)/[^/]*$")
  cache.clear(here, { "/tmp/../" .. dir:sub(2) }) -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
