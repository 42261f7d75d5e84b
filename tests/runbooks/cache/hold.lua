-- Takes the run lock on this machine (its first change) and keeps it for a while: the
-- whole machine's, so that no other run (a cache clear) changes anything here meanwhile.
runbook {
  name = "cache-hold",
  lock = "machine",
  params = {
    started = { required = true, help = "a file made once the lock is held" },
    sleep = { type = "number", default = 5 },
  },
}
local here = target("local")
step("hold the lock", function()
  here:exec({ "touch", params.started })
  sleep(params.sleep)
end)
