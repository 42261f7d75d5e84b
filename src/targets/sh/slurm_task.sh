# script: slurm-task.sh
# for: slurm targets
# The Slurm step's task on the node, around the command runbook starts there ("$@").
# It says which step and task it is (so that a timeout or Ctrl-C cancels that very step,
# and a launch on several nodes can tell their output apart), runs the command, and
# reports its exit status in band. It then exits 0 itself: srun's own status is left to
# say whether the launch worked (srun gives only the highest status of all its tasks,
# and adds a line of its own to stderr for each task that failed).
#
# Every line it prints for runbook carries the launch's TOKEN, the first line of its
# standard input (the second is the token again, for the group report of the wrapper
# in "$@", `wrap::killable_with_token`): the command's own stderr comes through srun
# on the same stream, and without the token a line it printed would name another
# job's step for runbook to cancel. The token is in no argv or environment.
IFS= read -r _rb_k || exit 125
printf '\036runbook-slurm-task=%s %s.%s %s %s\n' "$_rb_k" "${SLURM_JOB_ID:-}" "${SLURM_STEP_ID:-}" "${SLURM_PROCID:-0}" "${SLURMD_NODENAME:-}" >&2
"$@"
_rb_st=$?
printf '\036runbook-slurm-exit=%s %s\n' "$_rb_k" "$_rb_st" >&2
exit 0
