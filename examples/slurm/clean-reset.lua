-- clean-reset on every node of a running Slurm job: fresh venv, known-good code,
-- compile caches moved aside and re-warmed single-threaded, on each node the job runs on.
-- Every command is a step inside the job's allocation (its cgroup, its GPUs).
--
--   runbook run examples/slurm/clean-reset.lua --set job=4242 --set venv=/scratch/{node}/venv \
--     --set repo=/home/me/dflash --set warmup=warmup.py --set cache=/scratch/{node}/inductor
--
-- `{node}` in a path is the node's name, for node-local scratch. One node at a time by
-- default (a broken reset stops before it reaches the next node); `all_at_once = true`
-- resets every node together, and the reads common to all of them are one srun launch.
-- The same flow on one SSH host or container is runbooks/clean-reset.lua.
runbook {
  name = "slurm-clean-reset",
  description = "clean reset on every node of a running Slurm job, one at a time or all at once",
  params = {
    job = { type = "integer", required = true, help = "the running Slurm job whose nodes are reset" },
    all_at_once = {
      type = "boolean",
      default = false,
      help = "reset every node together instead of one after the other",
    },
    venv = { required = true, help = "the training venv on each node, rebuilt fresh ({node}: the node's name)" },
    python = { default = "python3", help = "python for the venv" },
    repo = { required = true, help = "the model code checkout on each node ({node} allowed)" },
    good_rev = { default = "HEAD", help = "the known-good git revision" },
    warmup = { required = true, help = "warm-up script, relative to repo" },
    cache = { required = true, help = "the inductor compile cache on each node ({node} allowed)" },
  },
}

local function on(t, path)
  return (path:gsub("{node}", t.name:match("^slurm:([^?]+)") or t.name))
end

local nodes = {} ---@type runbook.Target[]

step("nodes of the job", function()
  nodes = targets("slurm:job=" .. params.job)
  local names = {}
  for _, t in ipairs(nodes) do
    names[#names + 1] = t.name
  end
  log.info(("job %d runs on %d node(s): %s"):format(params.job, #nodes, table.concat(names, " ")))
end)

step("clean reset", function()
  local limit = params.all_at_once and math.max(#nodes, 1) or 1
  parallel(nodes, function(t)
    local venv_dir, repo, cache_dir = on(t, params.venv), on(t, params.repo), on(t, params.cache)
    venv.build(t, { path = venv_dir, python = params.python, fresh = true })
    git.restore(t, { repo = repo, rev = params.good_rev })
    cache.clear(t, { cache_dir }, { keep = true })
    warmup.run(t, {
      venv = venv_dir,
      script = repo .. "/" .. params.warmup,
      cwd = repo,
      single_threaded = true,
      env = { TORCHINDUCTOR_CACHE_DIR = cache_dir },
      expect_cache = { cache_dir },
    })
  end, { limit = limit })
end)
