-- One destructive change under a described runbook: tests/plan.rs edits each field of its
-- plan that text, Markdown or apply's prompt shows, and apply must refuse every edit.
runbook {
  name = "bound",
  description = "Clear the old junk of a service",
  params = { dir = { type = "path", required = true } },
}
local here = target("local")
step("clear the junk", function()
  here:exec({ "rm", "-rf", "--", params.dir .. "/junk" }, { summary = "delete the old junk in " .. params.dir })
end)
