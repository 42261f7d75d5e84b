# kill_tree.sh PGID (after signal.sh): stops a whole process group: TERM, up to 2 s to
# go, then KILL.
sig TERM "$1" || exit 0
i=0
while [ "$i" -lt 20 ]; do
  sig 0 "$1" || exit 0
  sleep 0.1
  i=$((i + 1))
done
sig KILL "$1"
exit 0
