# script: proc-probe.sh
# for: proc.spawn, proc.stop
# made of: runbook_dir.sh signal.sh proc_lib.sh proc_probe.sh
# args: name pid
# proc_probe.sh NAME PID: prints `running PID`, `stopped PID` or `none`, for the job
# NAME (its pid file) or the process PID (NAME empty).
pid=$2 t=''
[ -z "$1" ] || { d=$(runbook_dir) || exit 1; f=$d/proc-$1.pid; no_link "$f" || exit 1; [ -r "$f" ] && read -r pid t < "$f"; }
case $pid in ''|*[!0-9]*) echo none; exit 0 ;; esac
if up "$pid" "$t"; then echo "running $pid"; else echo "stopped $pid"; fi
