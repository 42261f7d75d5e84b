-- Drill 3: the state dir cannot take the run record (read-only or full filesystem).
-- runbook must refuse before its first step: `changed` must never appear.
runbook {
  name = "drill-state-dir",
  description = "One change, which must not happen when the run cannot be recorded",
  params = { dir = { type = "path", required = true, help = "scratch dir" } },
}

step("change", function()
  target("local"):exec({ "touch", params.dir .. "/changed" })
end)
