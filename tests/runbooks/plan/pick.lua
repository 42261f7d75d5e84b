-- A read decides which directory is deleted: the plan names one, and the apply must not
-- delete another.
runbook { name = "pick", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("pick and delete", function()
  local r = here:exec({ "cat", "--", params.dir .. "/which" }, { read_only = true })
  here:exec({ "rm", "-rf", "--", params.dir .. "/" .. r.stdout:gsub("%s+$", "") })
end)
step("later", function() here:exec({ "touch", params.dir .. "/later" }) end)
