runbook {
  name = "flow-preview",
  description = "a small runbook whose dry-run preview is snapshotted",
  params = {
    dir   = { type = "path", default = "/nonexistent/flow-preview", help = "where to work" },
    count = { type = "integer", default = 2 },
  },
}
local here = target("local")

step("look", function()
  here:exec({ "echo", "looking" }, { read_only = true })
end)

step("make", { retries = 1 }, function()
  here:exec({ "mkdir", "-p", "--", params.dir })
  for i = 1, params.count do
    here:exec({ "tee", params.dir .. "/f" .. i }, { stdin = "line " .. i .. "\n" })
  end
  here:shell("ls " .. params.dir .. " | wc -l")
end)

step("never", { when = function() return false end }, function()
  here:exec({ "true" })
end)

step("remove", { always = true }, function()
  log.info("removing", params.dir)
  here:exec({ "rm", "-rf", "--", params.dir })
end)
