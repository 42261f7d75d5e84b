-- runbook.text: small helpers for reading command output.
--   local text = require("runbook.text")
--   for _, line in ipairs(text.lines(r.stdout)) do … end
local text = {}

--- Splits output into lines, without the line endings; a trailing newline adds no empty line.
---@param s string?
---@return string[]
function text.lines(s)
  local out = {}
  if s == nil or s == "" then return out end
  for line in (s:sub(-1) == "\n" and s or s .. "\n"):gmatch("(.-)\r?\n") do
    out[#out + 1] = line
  end
  return out
end

--- Removes leading and trailing whitespace.
---@param s string
---@return string
function text.trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

--- Splits on a plain (non-pattern) separator; default: runs of whitespace.
---@param s string
---@param sep? string
---@return string[]
function text.split(s, sep)
  local out = {}
  if sep == nil then
    for word in s:gmatch("%S+") do
      out[#out + 1] = word
    end
    return out
  end
  local start = 1
  while true do
    local i, j = s:find(sep, start, true)
    if not i then
      out[#out + 1] = s:sub(start)
      return out
    end
    ---@cast j integer
    out[#out + 1] = s:sub(start, i - 1)
    start = j + 1
  end
end

--- True when s begins with prefix.
---@param s string
---@param prefix string
---@return boolean
function text.starts_with(s, prefix)
  return s:sub(1, #prefix) == prefix
end

return text
