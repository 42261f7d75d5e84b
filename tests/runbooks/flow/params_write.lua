runbook {
  name = "flow-params-write",
  description = "writes to params, which is an error",
  params = { count = { type = "integer", default = 1 } },
}

step("write", function()
  params.count = 2
end)
