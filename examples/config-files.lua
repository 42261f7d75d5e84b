-- Files on a target, as Ansible's copy and template modules write them: a config
-- rendered from a Jinja2 template beside this runbook, a file put as it is, one read back.
-- Preview it (each file's diff):  runbook run examples/config-files.lua --dry-run
-- Run it twice: the second run changes nothing.
runbook {
  name = "config-files",
  description = "Render a config from a template, put a file beside it, read it back",
  params = {
    dir = { type = "path", default = "/tmp/runbook-config", help = "where the files go (made first)" },
    workers = { type = "integer", default = 4, help = "workers = in the config" },
  },
}

local here = target("local")

step("make the directory", function()
  here:exec({ "mkdir", "-p", "--", params.dir })
end)

step("write the config", function()
  local conf = file.template(here, {
    path = params.dir .. "/app.conf",
    src = "files/app.conf.j2",
    vars = {
      name = "demo",
      port = 8080,
      workers = params.workers,
      upstreams = { "app1.example:8000", "app2.example:8000" },
    },
    mode = "0644",
    backup = true,
  })
  if conf.backup then log.info("the old config is kept as " .. conf.backup) end
  file.put(
    here,
    { path = params.dir .. "/README", content = "Written by runbook: edit examples/files/app.conf.j2 instead.\n" }
  )
end)

step("read it back", function()
  local conf = file.get(here, params.dir .. "/app.conf", { missing_ok = true })
  -- A dry-run planned the write (nothing there yet); --offline read nothing at all.
  if conf == nil or conf.planned then
    log.info("the config was not written, so there is nothing to read yet")
    return
  end
  local sha = conf.sha256 or ""
  log.info(("app.conf: %d bytes, mode %s, sha256 %s"):format(conf.size or 0, conf.mode or "?", sha:sub(1, 12)))
end)
