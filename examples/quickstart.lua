-- A first runbook: make a work directory, write files, verify them, clean up.
-- Preview it:  runbook run examples/quickstart.lua --dry-run
-- Run it:      runbook run examples/quickstart.lua --yes
runbook {
  name = "quickstart",
  description = "Write files into a scratch directory, verify their checksums, clean up",
  params = {
    dir = { type = "path", default = "/tmp/runbook-quickstart", help = "scratch directory (removed at the end)" },
    count = { type = "integer", default = 3, help = "how many files to write" },
    keep = { type = "boolean", default = false, help = "keep the directory afterwards" },
  },
}

local text = require("runbook.text")
local here = target("local")
local wrote_for_real = false

step("prepare the work directory", function()
  here:exec({ "mkdir", "-p", "--", params.dir })
end)

step("write files", { retries = 1, timeout = "30s" }, function()
  for i = 1, params.count do
    local r = here:exec({ "tee", params.dir .. "/file-" .. i .. ".txt" }, { stdin = "hello " .. i .. "\n" })
    wrote_for_real = not r.planned
  end
end)

step("verify checksums", function()
  if not wrote_for_real then
    log.info("dry-run: the files were not written, so there is nothing to verify yet")
    return
  end
  local r = here:exec({ "sha256sum", "--", "file-1.txt" }, { read_only = true, cwd = params.dir })
  local listing = here:exec({ "ls", "-1", "--", params.dir }, { read_only = true })
  local files = text.lines(listing.stdout)
  if #files ~= params.count then
    fail(("expected %d files in %s, found %d"):format(params.count, params.dir, #files))
  end
  local sum = text.split(r.stdout)[1]
  -- sha256 of "hello 1\n"
  if sum ~= "a96db6890367a8bc049841501ba1b0ab38bbdca062885d94f0130b17d162dea9" then
    fail("file-1.txt has the wrong content: sha256 " .. tostring(sum))
  end
  log.info(("%d files verified, file-1.txt sha256 %s"):format(#files, sum:sub(1, 12)))
end)

step("clean up", {
  always = true,
  when = function()
    return not params.keep
  end,
}, function()
  here:exec({ "rm", "-rf", "--", params.dir })
end)
