-- The secret values are spelled backwards here so that the file's own text never holds them.
runbook {
  name = "flow-secrets",
  description = "echoes secrets every way it can",
  params = {
    token = { secret = true, default = ("tluafed-terces-nekot"):reverse(), help = "an API token" },
    dir   = { type = "path", required = true },
  },
}
local here = target("local")
local derived

step("derive", function()
  derived = secret(("eulav-terces-devired"):reverse())
  log.info("derived is", derived)
  log.debug("debug token", params.token, derived)
end)

step("echo", function()
  here:exec({ "echo", "token:", params.token, "derived:", derived })
  here:shell("echo token " .. params.token .. " derived " .. derived .. " >&2")
  here:exec({ "echo", params.token }, { read_only = true })
  here:exec({ "touch", params.dir .. "/" .. derived })
  log.warn("token", params.token)
end)

step("fail with it", function()
  fail("boom " .. params.token .. " " .. derived)
end)
