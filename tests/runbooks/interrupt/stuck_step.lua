-- A step held in one call into C that does not return (a backtracking pattern): the
-- signal must end the run within a second, its record closed.
runbook {
  name = "interrupt-stuck-step",
  description = "A step stuck in string.find until interrupted",
  params = { dir = { type = "path", required = true, help = "scratch dir for the marker file" } },
}

local here = target("local")

step("stuck", function()
  here:exec({ "touch", params.dir .. "/started" })
  local s = string.rep("a", 30000)
  return s:find(".-.-.-.-.-.-b")
end)

step("later", function()
  here:exec({ "touch", params.dir .. "/later" })
end)
