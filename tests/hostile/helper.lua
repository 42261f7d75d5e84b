-- A module beside the sandbox runbooks: require("helper").
local helper = {}

function helper.greet(who)
  return "hello " .. who .. " from helper.lua"
end

return helper
