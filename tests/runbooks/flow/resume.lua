-- Step 2 fails until the marker file exists: the tests create it between runs.
runbook {
  name = "flow-resume",
  description = "step 1 records each run, step 2 needs a marker",
  params = {
    dir   = { type = "path", required = true, help = "scratch dir" },
    label = { default = "a", help = "recorded, to test that resume compares params" },
  },
}
local here = target("local")

step("count runs", function()
  here:shell("echo " .. params.label .. " >> " .. params.dir .. "/step1.log")
end)

step("needs marker", function()
  here:exec({ "test", "-e", params.dir .. "/marker" })
  here:exec({ "touch", params.dir .. "/step2.done" })
end)
