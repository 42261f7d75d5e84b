runbook {
  name = "flow-read-only",
  description = "a read_only command runs during --dry-run, a change does not",
  params = { dir = { type = "path", required = true } },
}
local here = target("local")

step("touch both", function()
  here:exec({ "touch", params.dir .. "/by-read" }, { read_only = true })
  here:exec({ "touch", params.dir .. "/by-change" })
end)
