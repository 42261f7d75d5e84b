runbook {
  name = "flow-failing",
  description = "step 2 fails; step 3 is skipped; step 4 always runs",
  params = { dir = { type = "path", required = true } },
}
local here = target("local")

step("first", function()
  here:exec({ "touch", params.dir .. "/first" })
end)

step("breaks", function()
  here:exec({ "sh", "-c", "echo about to fail >&2; exit 7" })
end)

step("after", function()
  here:exec({ "touch", params.dir .. "/after" })
end)

step("cleanup", { always = true }, function()
  here:exec({ "touch", params.dir .. "/cleanup" })
end)
