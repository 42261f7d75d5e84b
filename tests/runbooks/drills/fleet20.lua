-- Drill 5: one change on 20 hosts at once, some of which are down.
runbook {
  name = "drill-fleet",
  description = "Touch a marker on every host of a 20-node fleet in parallel",
  params = {
    dir = { type = "path", required = true, help = "scratch dir for the markers" },
    hosts = { type = "integer", default = 20, help = "nodes node1..nodeN" },
  },
}

local hosts = {}
for i = 1, params.hosts do hosts[i] = target("node" .. i) end

step("touch everywhere", function()
  parallel(hosts, function(t)
    t:exec({ "touch", params.dir .. "/" .. t.name })
    return t.name
  end, { limit = params.hosts })
end)

step("report", { always = true }, function() log.info("always step ran") end)
