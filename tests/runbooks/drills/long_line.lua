-- Drill 4b: one enormous output line with no newline (binary data, a progress bar that
-- only ever prints \r, `cat` of the wrong file).
runbook {
  name = "drill-long-line",
  description = "A command that prints one line of `mib` MiB and no newline",
  params = { mib = { type = "integer", default = 100, help = "size of the line in MiB" } },
}

step("one long line", function()
  local r = target("local"):exec({ "sh", "-c", [[head -c "$1" /dev/zero | tr '\0' a]], "sh",
    tostring(params.mib * 1024 * 1024) }, { read_only = true })
  log.info(string.format("captured %d bytes of stdout%s", #r.stdout,
    r.truncated and " (truncated)" or ""))
end)
