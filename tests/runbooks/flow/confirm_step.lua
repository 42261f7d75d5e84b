runbook {
  name = "flow-confirm-step",
  description = "a step that asks for confirmation",
  params = { dir = { type = "path", required = true } },
}
local here = target("local")

step("create", function()
  here:exec({ "touch", params.dir .. "/created" })
end)

step("risky", { confirm = true }, function()
  here:exec({ "touch", params.dir .. "/risky" })
end)
