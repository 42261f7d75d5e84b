runbook {
  name = "flow-confirm-rm",
  description = "creates a file, then deletes it with rm",
  params = { dir = { type = "path", required = true } },
}
local here = target("local")

step("create", function()
  here:exec({ "touch", params.dir .. "/created" })
end)

step("delete", function()
  here:exec({ "rm", "-f", "--", params.dir .. "/created" })
end)
