-- A secret every way a plan could hold it: env, stdin, an argv, a log line, a summary.
runbook {
  name = "secret",
  params = { token = { secret = true, required = true }, dir = { type = "path", required = true } },
}
local here = target("local")
step("use it", function()
  here:exec({ "sh", "-c", 'cat > "$1/from-stdin"; printf %s "$TOKEN" > "$1/from-env"', "sh", params.dir },
    { env = { TOKEN = params.token }, stdin = params.token })
  here:exec({ "touch", params.dir .. "/argv-" .. params.token })
  local r = here:exec({ "echo", params.token }, { read_only = true })
  log.info("read back " .. r.stdout)
end)
