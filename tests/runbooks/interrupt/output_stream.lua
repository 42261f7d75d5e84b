-- A command that prints a lot: every line is an event, and the result has them all.
runbook {
  name = "interrupt-output-stream",
  description = "Stream 20000 lines",
  params = { dir = { type = "path", required = true, help = "scratch dir for the copy of stdout" } },
}

local here = target("local")

step("print", function()
  local r = here:exec({ "seq", "1", "20000" }, { read_only = true })
  local _, n = r.stdout:gsub("\n", "")
  if n ~= 20000 then fail("result stdout has " .. n .. " lines") end
  here:exec({ "tee", params.dir .. "/stdout.txt" }, { stdin = r.stdout })
end)
