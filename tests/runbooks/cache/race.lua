-- cache.clear, cache.clear{keep} and cache.restore{force}, again and again, on a path
-- inside /tmp while the test (tests/cache.rs) swaps one of its parent directories with a
-- symlink to a directory outside every cache root. Each try that lost the canary out
-- there is logged ("escaped<TAB>try=N<TAB>op=OP") and the canary made again, so the test
-- can count them.
runbook {
  name = "cache-race",
  params = {
    path = { required = true, help = "the cache dir inside /tmp: DIR/a/cache" },
    other = { required = true, help = "the same dir under the swapped name: DIR/b/cache" },
    canary = { required = true, help = "a file outside every cache root that must stay" },
    tries = { type = "integer", default = 200 },
  },
}
local here = target("local")
local ops = { "clear", "keep", "restore" }

step("race", function()
  for i = 1, params.tries do
    -- The cache again, in the real directory whichever name it has now (through the
    -- symlink this only adds a file beside the canary); the swaps may fail it.
    here:exec({ "sh", "-c", 'for d in "$@"; do mkdir -p -- "$d" && : >"$d/f"; done', "sh",
      params.path, params.other }, { destructive = false, check = false })
    local op = ops[i % 3 + 1]
    pcall(function()
      if op == "clear" then
        cache.clear(here, params.path, { force = true })
      elseif op == "keep" then
        cache.clear(here, params.path, { keep = true, force = true })
      else
        cache.restore(here, params.path, { force = true })
      end
    end)
    local alive = here:exec({ "test", "-f", params.canary }, { check = false, read_only = true })
    if not alive.ok then
      log.info(("escaped\ttry=%d\top=%s"):format(i, op))
      local dir = params.canary:match("^(.*)/[^/]*$")
      here:exec({ "sh", "-c", 'mkdir -p -- "$1" && : >"$2"', "sh", dir, params.canary },
        { destructive = false })
    end
  end
end)
