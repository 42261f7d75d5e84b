# script: proc-forget.sh
# for: proc.stop
# made of: runbook_dir.sh proc_lib.sh proc_forget.sh
# args: name
# proc_forget.sh NAME: removes the pid file of job NAME, which has exited by itself, and
# prints `gone`; a job that runs again under that name (started since it was looked at)
# is left alone, its pid file too: prints `running PID`.
d=$(runbook_dir) || exit 1; f=$d/proc-$1.pid; no_link "$f" || exit 1
p='' t=''
[ -r "$f" ] && read -r p t < "$f"
case $p in ''|*[!0-9]*) ;; *) if up "$p" "$t"; then echo "running $p"; exit 0; fi ;; esac
rm -f -- "$f" || exit 1
echo gone
