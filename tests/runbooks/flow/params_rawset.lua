runbook {
  name = "flow-params-rawset",
  description = "tries to get past the read-only params with rawset, rawget and pairs",
  params = { count = { type = "integer", default = 1 } },
}

step("raw access", function()
  log.info("rawget:", pcall(rawget, params, "count"))
  log.info("rawset:", pcall(rawset, params, "count", 2))
  local _, t = pairs(params)
  t.count = 3
  log.info("count is", params.count)
  log.info(
    "index:",
    pcall(function()
      return params[1]
    end)
  )
end)
