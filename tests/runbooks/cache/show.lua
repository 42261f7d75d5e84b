-- Logs a cache.* result table as one line, "result<TAB>key=value…" with sorted keys, for
-- the tests to read back from the --json events.
return function(r)
  local keys = {}
  for k in pairs(r) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = { "result" }
  for _, k in ipairs(keys) do
    local v = r[k]
    if type(v) == "table" then v = table.concat(v, ",") end -- a list (pruned)
    parts[#parts + 1] = k .. "=" .. tostring(v)
  end
  log.info(table.concat(parts, "\t"))
end
