-- A read that decides nothing: what it returns may change, the change stays the same.
runbook { name = "note", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("note and touch", function()
  local r = here:exec({ "cat", "--", params.dir .. "/note" }, { read_only = true })
  log.info("note: " .. r.stdout)
  here:exec({ "touch", params.dir .. "/touched" })
end)
