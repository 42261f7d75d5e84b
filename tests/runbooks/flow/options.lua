runbook {
  name = "flow-options",
  description = "retries, when, check = false",
  params = { dir = { type = "path", required = true } },
}
local here = target("local")

step("flaky", { retries = 2, delay = 0 }, function()
  here:shell("n=$(cat " .. params.dir .. "/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > " .. params.dir .. "/count; test $n -ge 3")
end)

step("never", { when = function() return false end }, function()
  here:exec({ "touch", params.dir .. "/never" })
end)

step("unchecked", function()
  local r = here:exec({ "sh", "-c", "exit 3" }, { check = false })
  log.info("code=" .. tostring(r.code) .. " ok=" .. tostring(r.ok))
end)
