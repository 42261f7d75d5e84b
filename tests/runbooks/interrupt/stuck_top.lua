-- The top level is held in one call into C that does not return (a backtracking
-- pattern): no instruction hook runs until it does, so only the watchdog can act on a
-- signal, and it must within a second.
runbook {
  name = "interrupt-stuck-top",
  description = "A top level stuck in string.find until interrupted",
  params = { dir = { type = "path", required = true, help = "scratch dir" } },
}

local here = target("local")
local s = string.rep("a", 30000)
local found = s:find(".-.-.-.-.-.-b")

step("never", function()
  here:exec({ "touch", params.dir .. "/later" })
end)
