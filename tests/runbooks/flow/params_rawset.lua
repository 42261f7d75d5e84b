runbook {
  name = "flow-params-rawset",
  description = "tries to get past the read-only params with rawset and rawget",
  params = { count = { type = "integer", default = 1 } },
}

step("raw access", function()
  log.info("rawget:", pcall(rawget, params, "count"))
  log.info("rawset:", pcall(rawset, params, "count", 2))
  log.info("count is", params.count)
end)
