-- A string doubled until it is huge hits the memory limit.
runbook {
  name = "sandbox-huge-concat",
  description = "Sandbox escape attempt; the test checks that it fails and changes nothing",
  params = { canary = { type = "path", required = true, help = "a file that must stay as it is" } },
}
local here = target("local")

step("escape", function() -- ESCAPE (an allocation failure carries no position: the step is named)
  local s = "x"
  for _ = 1, 40 do s = s .. s end
  log.info(#s)
end)

step("after", function()
  -- Runs only if the escape did not stop the run: it would delete the canary.
  here:exec({ "rm", "-f", "--", params.canary })
end)
