-- A small runbook whose plan a reviewer reads (tests/plan.rs snapshots its Markdown).
runbook {
  name = "review",
  description = "Rotate a service's work directory: keep the config, clear the old data",
  params = {
    dir   = { type = "path", required = true, help = "the service's directory" },
    mode  = { default = "fast", choices = { "fast", "full" }, help = "how much to clear" },
    token = { secret = true, required = true, help = "the service's API token" },
  },
}
local here = target("local")

step("look", function()
  local r = here:exec({ "ls", "-1", "--", params.dir }, { read_only = true })
  log.info("found: " .. r.stdout:gsub("\n", " "))
end)

step("write the config", function()
  here:exec({ "tee", params.dir .. "/config" }, { stdin = "mode=" .. params.mode .. "\ntoken=" .. params.token .. "\n" })
end)

step("clear old data", function()
  here:exec({ "rm", "-rf", "--", params.dir .. "/old" })
  here:exec({ "sh", "-c", 'for f in "$1"/*.tmp; do\n  [ ! -e "$f" ] || rm -f -- "$f"\ndone', "sh", params.dir },
    { summary = "delete the *.tmp files in " .. params.dir, destructive = true })
end)

step("full clear", { when = function() return params.mode == "full" end }, function()
  here:exec({ "rm", "-rf", "--", params.dir .. "/cache" })
end)
