-- io.open inside a step is refused before any step runs (the load-time global check), naming the line.
runbook {
  name = "sandbox-io-open-step",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function()
  local f = io.open(params.canary, "w") -- ESCAPE
  f:write("escaped\n")
  f:close()
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
