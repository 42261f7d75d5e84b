-- A step that fails on every attempt: tried 1 + retries times.
runbook {
  name = "interrupt-retries",
  description = "A step that never succeeds",
}

step("flaky", { retries = 2, delay = "100ms" }, function()
  fail("still broken")
end)
