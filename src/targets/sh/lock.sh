# lock.sh WAIT WHO [NAME] (after runbook_dir.sh):
# Takes the lock (waiting up to $1 seconds), records who holds it next to it, answers
# `locked` (or `busy <holder>`), then holds it until stdin closes. The lock file is
# the target's own choice: `$RUNBOOK_LOCK_FILE` in its environment, else `lock` in
# `runbook_dir`; NAME makes it `…-NAME` (a Slurm node's lock: nodes often share one home,
# where their locks must still be apart). A failed redirection would end `sh` silently, hence the probe in a subshell.
wait=$1; who=$2
if [ -n "${RUNBOOK_LOCK_FILE:-}" ]; then f=$RUNBOOK_LOCK_FILE
else d=$(runbook_dir 2>&1) || { echo "error: $d"; exit 0; }; f=$d/lock; fi
[ -z "${3:-}" ] || f=$f-$3
for p in "$f" "$f.holder"; do [ ! -L "$p" ] || { echo "error: $p is a symbolic link; refusing to write through it"; exit 0; }; done
command -v flock >/dev/null 2>&1 || { echo "error: needs flock for the run lock (util-linux, or busybox built with its flock applet); nothing was changed"; exit 0; }
umask 077
( : >>"$f" ) 2>/dev/null || { echo "error: cannot open $f"; exit 0; }
exec 9>>"$f"
if [ "$wait" = 0 ]; then flock -n 9; else flock -w "$wait" 9; fi || { printf 'busy %s\n' "$(cat "$f.holder" 2>/dev/null)"; exit 0; }
printf '%s\n' "$who" > "$f.holder"
echo locked
exec cat >/dev/null
