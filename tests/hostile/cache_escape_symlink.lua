-- cache.clear through a symlink to the canary's folder: refused (deleting through a link is never allowed).
runbook {
  name = "sandbox-cache-escape-symlink",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  local dir = params.canary:match("^(.*)/[^/]*$")
  local link = dir .. "-link"
  here:exec({ "ln", "-sfn", "--", dir, link })
  cache.clear(here, { link }) -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
