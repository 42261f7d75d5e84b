-- The size of one directory as each primitive measures it, all during --dry-run:
-- cache.size, fingerprint.take, warmup.run (before: the run itself is only planned) and
-- cache.clear (whose planned delete shows it too). Each is logged as
-- "size<TAB>by=WHO<TAB>bytes=N<TAB>files=N".
runbook {
  name = "cache-sizes",
  params = {
    dir = { required = true, help = "the directory to measure, under /tmp" },
    script = { required = true, help = "a python script for the warm-up" },
  },
}
local here = target("local")

local function say(by, bytes, files)
  log.info(("size\tby=%s\tbytes=%s\tfiles=%s"):format(by, tostring(bytes), tostring(files)))
end

step("measure", function()
  local s = cache.size(here, params.dir)[1]
  say("cache.size", s.bytes, s.files)
  local c = fingerprint.take(here, { caches = { params.dir } }).caches[params.dir] or {}
  say("fingerprint", c.bytes, c.files)
  local w = warmup.run(here, { script = params.script, expect_cache = params.dir }).caches[1]
  say("warmup", w.bytes_before, w.files_before)
  local r = cache.clear(here, params.dir)[1]
  say("cache.clear", r.bytes, r.files)
end)
