runbook {
  name = "flow-params",
  description = "reports its params",
  params = {
    count = { type = "integer", default = 1, help = "how many" },
    flag  = { type = "boolean", default = false, help = "a switch" },
    color = { choices = { "red", "green" }, default = "red", help = "a colour" },
    name  = { required = true, help = "who" },
  },
}

step("report", function()
  log.info(("count=%d flag=%s color=%s name=%s"):format(params.count, tostring(params.flag), params.color, params.name))
end)
