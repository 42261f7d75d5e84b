# script: detach-start.sh
# for: commands with `detach = true` (and those whose timeout is over 5 minutes)
# made of: runbook_dir.sh detach_lib.sh detach_start.sh
# detach_start.sh JOB RUN STEP ARGV...: starts ARGV detached from the connection that
# asked, so that it outlives it (an sshd restart, a network blip, a laptop asleep, a
# runbook killed outright), and prints where it runs:
#   started PGID BOOT_ID STAT_LINE     (or "exists …" when JOB was started before: a
#                                       retry after a lost connection, or --resume)
# In the job's directory: `in` (this script's stdin, the command's: removed once the
# command has it open), `out` and `err`
# (its output), `group` (what the first line says), `meta` (RUN, STEP and the argv, for
# `runbook ps`), and `status` once it ended (written whole: a temporary file renamed).
# The supervisor is a subshell in the background: its command runs in a session (and
# process group) of its own, by setsid, so that a timeout or Ctrl-C stops the
# command's whole tree by its group, while the supervisor lives on to write the status.
j=$(job_dir "$1") || exit
run=$2 step=$3
shift 3
[ "$#" -gt 0 ] || { echo "runbook: detach-start: no command" >&2; exit 2; }
[ -d "${j%/*}" ] || mkdir -m 700 -- "${j%/*}" || exit 1
if ! mkdir -m 700 -- "$j" 2>/dev/null; then
  if [ -L "$j" ] || [ ! -d "$j" ]; then
    echo "runbook: cannot make $j" >&2
    exit 1
  fi
  # Started before: wait (briefly) for its group, which the supervisor writes first.
  i=0
  while [ ! -s "$j/group" ] && [ "$i" -lt 50 ]; do
    sleep 0.1 2>/dev/null || sleep 1
    i=$((i + 1))
  done
  [ -s "$j/group" ] || { echo "runbook: job $1 was started but never reported its group" >&2; exit 1; }
  printf 'exists '
  cat -- "$j/group"
  exit 0
fi
command -v setsid >/dev/null || { echo "runbook: needs setsid (util-linux or busybox: a detached command runs in a session of its own)" >&2; exit 127; }
cat >"$j/in" || exit 1
{ printf '%s\n%s\n' "$run" "$step" && printf '%s\n' "$@"; } >"$j/meta" || exit 1
: >"$j/out" && : >"$j/err" || exit 1
boot=-
IFS= read -r boot 2>/dev/null </proc/sys/kernel/random/boot_id || boot=-
(
  # Nothing of the connection that started it: no stdin, no channel to write to.
  # Its stdin (which may carry the environment's values) is opened here and removed:
  # nothing of it stays on disk past the start.
  exec <"$j/in" >/dev/null 2>&1 && rm -f -- "$j/in" || exit 1
  trap '' HUP
  setsid "$@" >"$j/out" 2>"$j/err" &
  p=$!
  exec </dev/null
  l=-
  IFS= read -r l 2>/dev/null <"/proc/$p/stat" || l=-
  echo "$p $boot $l" >"$j/group.tmp" && mv -f -- "$j/group.tmp" "$j/group"
  wait "$p"
  echo "$?" >"$j/status.tmp" && mv -f -- "$j/status.tmp" "$j/status"
) &
i=0
while [ ! -s "$j/group" ] && [ "$i" -lt 100 ]; do
  sleep 0.05 2>/dev/null || sleep 1
  i=$((i + 1))
done
[ -s "$j/group" ] || { echo "runbook: the detached command did not start within 5 s" >&2; exit 1; }
printf 'started '
cat -- "$j/group"
