# The Slurm step's task on the node, around the command runbook starts there ("$@").
# It says which step and task it is (so that a timeout or Ctrl-C cancels that very step,
# and a launch on several nodes can tell their output apart), runs the command, and
# reports its exit status in band. It then exits 0 itself: srun's own status is left to
# say whether the launch worked (srun gives only the highest status of all its tasks,
# and adds a line of its own to stderr for each task that failed).
printf '\036runbook-slurm-task=%s.%s %s %s\n' "${SLURM_JOB_ID:-}" "${SLURM_STEP_ID:-}" "${SLURM_PROCID:-0}" "${SLURMD_NODENAME:-}" >&2
"$@"
_rb_st=$?
printf '\036runbook-slurm-exit=%s\n' "$_rb_st" >&2
exit 0
