-- load() cannot name its chunk after another file: chunk names are runbook's to set.
runbook {
  name = "sandbox-load-chunkname",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")
step("escape", function()
  load("error('boom')", "@/etc/passwd")() -- ESCAPE
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
