-- A command `timeout` stops the whole tree: with check = false the step carries on and
-- sees `timed_out`, with the default check the step fails.
runbook {
  name = "interrupt-command-timeout",
  description = "Command timeouts with and without check",
  params = { dir = { type = "path", required = true, help = "scratch dir for pid and marker files" } },
}

local here = target("local")

step("unchecked", function()
  local r = here:shell("sleep 1000 & echo $! > u_child.pid; echo $$ > u_shell.pid; wait",
    { timeout = "300ms", check = false, cwd = params.dir })
  if r.timed_out ~= true then fail("timed_out is " .. tostring(r.timed_out)) end
  if r.ok ~= false then fail("ok is " .. tostring(r.ok)) end
  here:exec({ "tee", params.dir .. "/unchecked.txt" },
    { stdin = "timed_out=" .. tostring(r.timed_out) .. " ok=" .. tostring(r.ok) })
end)

step("checked", function()
  here:shell("sleep 1000 & echo $! > c_child.pid; echo $$ > c_shell.pid; wait",
    { timeout = "300ms", cwd = params.dir })
  here:exec({ "touch", params.dir .. "/after_checked" })
end)
