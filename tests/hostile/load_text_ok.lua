-- load() of Lua source text still works, and only ever as text.
runbook {
  name = "sandbox-load-text-ok",
  description = "load() takes text chunks; bytecode is refused however it is handed in",
}

step("load text", function()
  local two = load("return 1 + 1")()
  log.info("text chunk:", two)

  -- Asking for binary mode still only loads text.
  local three = load("return 3", "chunk", "b")()
  log.info("mode b, text chunk:", three)

  -- Bytecode handed in through a reader function is refused as well.
  local sent = false
  local f, err = load(function()
    if sent then return nil end
    sent = true
    return "\27Lua\84\0\25\147\13\10\26\10"
  end)
  log.info("reader with bytecode:", tostring(f), err)

  -- A loaded chunk runs in the same sandbox.
  local ok, why = pcall(load("return io"))
  log.info("loaded chunk sees io:", ok)
end)
