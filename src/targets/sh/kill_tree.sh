# script: kill-tree.sh
# for: timeouts and Ctrl-C on remote targets
# made of: signal.sh kill_tree.sh
# kill_tree.sh PGID (after signal.sh): stops a whole process group: TERM, up to 2 s to
# go, then KILL.
# A session (session.sh) reports a command's group just before the command's setsid
# makes it: while the process with that pid lives and its group is not there yet, wait
# for the group (briefly) rather than miss it.
i=0
while ! sig 0 "$1" && kill -0 "$1" 2>/dev/null && [ "$i" -lt 20 ]; do
  sleep 0.05
  i=$((i + 1))
done
sig TERM "$1" || exit 0
i=0
while [ "$i" -lt 20 ]; do
  sig 0 "$1" || exit 0
  sleep 0.1
  i=$((i + 1))
done
sig KILL "$1"
exit 0
