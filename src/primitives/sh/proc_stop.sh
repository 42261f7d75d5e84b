# script: proc-stop.sh
# for: proc.stop
# made of: runbook_dir.sh signal.sh proc_lib.sh proc_stop.sh
# args: name pid timeout_ms
# proc_stop.sh NAME PID MS: TERM the job's group, wait up to MS milliseconds (-1: until
# it exits), then KILL. Prints `term PID`, `kill PID`, `stopped PID` (was not running) or
# `none`. A PID that leads no group is signalled alone. sig comes from signal.sh.
pid=$2 t='' f=''
[ -z "$1" ] || { d=$(runbook_dir) || exit 1; f=$d/proc-$1.pid; no_link "$f" || exit 1; [ -r "$f" ] && read -r pid t < "$f"; }
case $pid in ''|*[!0-9]*) echo none; exit 0 ;; esac
if ! up "$pid" "$t"; then [ -z "$1" ] || rm -f "$f"; echo "stopped $pid"; exit 0; fi
# send SIGNAL: to the job's group, or to the pid alone when it leads none.
group=1
send() { if [ "$group" = 1 ]; then sig "$1" "$pid"; else kill -s "$1" "$pid" 2>/dev/null; fi; }
send TERM || { group=0; send TERM; }
i=0; while up "$pid" "$t" && { [ "$3" -lt 0 ] || [ $i -lt $(($3 / 100)) ]; }; do sleep 0.1; i=$((i+1)); done
how='term'
if up "$pid" "$t"; then how='kill'; send KILL; i=0; while up "$pid" "$t" && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; fi
[ -z "$1" ] || rm -f "$f"
echo "$how $pid"
