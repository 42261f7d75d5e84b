-- A step timeout covers Lua code: an endless loop ends with "timed out".
runbook {
  name = "interrupt-step-timeout-lua",
  description = "A step whose Lua code never returns",
}

step("spin", { timeout = "500ms" }, function()
  while true do end
end)
