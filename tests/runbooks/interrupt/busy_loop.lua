-- A signal must also stop a step that is busy in Lua code (no command, no sleep).
runbook {
  name = "interrupt-busy-loop",
  description = "A step that spins in Lua until interrupted",
  params = { dir = { type = "path", required = true, help = "scratch dir for the marker file" } },
}

local here = target("local")

step("spin", function()
  here:exec({ "touch", params.dir .. "/spinning" })
  while true do end
end)

step("cleanup", { always = true }, function()
  here:exec({ "touch", params.dir .. "/always" })
end)
