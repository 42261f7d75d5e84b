-- Whether a job runs decides a change: a running one is stopped, then one is started.
runbook {
  name = "job",
  params = { dir = { type = "path", required = true }, job = { required = true } },
}
local here = target("local")
step("stop the job", function() proc.stop(here, { name = params.job }) end)
step("start the job", function()
  proc.spawn(here, { name = params.job, cmd = { "sleep", "60" }, log = params.dir .. "/job.log" })
end)
