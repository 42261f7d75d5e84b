-- What require() may reach: the embedded stdlib and Lua files inside the runbook's folder.
runbook {
  name = "sandbox-require-ok",
  description = "require() of the stdlib and of helper files beside the runbook works",
}

local text = require("runbook.text")
local helper = require("helper")
local util = require("lib.util")

step("use modules", function()
  log.info("text:", text.trim("  trimmed  "))
  log.info("helper:", helper.greet("runbook"))
  log.info("util:", util.answer)
  log.info("same table:", require("helper") == helper)
end)
