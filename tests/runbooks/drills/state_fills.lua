-- Drill 3c: the state dir fills up while the run goes on. The first step's output fills
-- the record's filesystem; the second step is a change that would then go unrecorded.
runbook {
  name = "drill-state-fills",
  description = "A noisy step that fills the state dir, then a change",
  params = {
    dir = { type = "path", required = true, help = "scratch dir" },
    lines = { type = "integer", default = 5000, help = "output lines of the noisy step" },
  },
}

local here = target("local")

step("noisy", function()
  here:exec({ "seq", "1", tostring(params.lines) }, { read_only = true })
end)

step("change", function()
  here:exec({ "touch", params.dir .. "/changed" })
end)
