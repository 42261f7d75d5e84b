-- sleep() waits inside a step, and a signal ends the wait.
runbook {
  name = "interrupt-lua-sleep",
  description = "A short sleep, then a long one that gets interrupted",
  params = { dir = { type = "path", required = true, help = "scratch dir for marker files" } },
}

local here = target("local")

step("short nap", function()
  sleep("200ms")
end)

step("long nap", function()
  here:exec({ "touch", params.dir .. "/ready" })
  sleep("100s")
  here:exec({ "touch", params.dir .. "/woke" })
end)
