# script: proc-spawn.sh
# for: proc.spawn
# made of: runbook_dir.sh signal.sh proc_lib.sh proc_spawn.sh
# args: name log cmd...
# proc_spawn.sh NAME LOG ARGV...: starts ARGV detached (its own session, stdin from
# /dev/null, output appended to LOG), records its pid and start time in the pid file,
# prints the pid, the pid file and the size of LOG before the job started.
d=$(runbook_dir) || exit 1; f=$d/proc-$1.pid log=$2; shift 2
no_link "$f" || exit 1
if [ -r "$f" ] && read -r pid t < "$f" && [ -n "$pid" ] && up "$pid" "$t"; then echo "runbook: already running (pid $pid)" >&2; exit 3; fi
command -v setsid >/dev/null || { echo "runbook: needs setsid (util-linux or busybox: a job runs in a session of its own)" >&2; exit 127; }
command -v "$1" >/dev/null || { echo "runbook: $1: command not found" >&2; exit 127; }
: >> "$log" || exit 1
off=$(wc -c < "$log") || exit 1
setsid "$@" < /dev/null >> "$log" 2>&1 &
pid=$! t=''
# The stat fields after the command name, split on purpose: the start time is ${20}.
if IFS= read -r l 2>/dev/null < "/proc/$pid/stat"; then
  # shellcheck disable=SC2086
  set -- ${l##*) }
  t=${20}
fi
{ echo "$pid $t" > "$f.$$" && mv -f "$f.$$" "$f"; } || { kill -s KILL -- "-$pid"; exit 1; }
printf '%s\n%s\n%s\n' "$pid" "$f" "$((off))"
