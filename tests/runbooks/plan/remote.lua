-- One change on a target named by a param: the targets of a plan, checked again by apply.
runbook { name = "remote", params = { host = { required = true }, dir = { type = "path", required = true } } }
local there = target(params.host)
step("touch there", function() there:exec({ "touch", params.dir .. "/made-there" }) end)
