# script: detach-list.sh
# for: runbook ps
# made of: runbook_dir.sh signal.sh detach_lib.sh detach_list.sh
# detach_list.sh: one block per detached job on this machine: a line
# "JOB STATE PGID", STATE running, ended N (not collected yet) or lost; then its meta
# file (RUN, STEP, one argv word a line) with each line prefixed by "=", and a line ".".
_rb_d=$(runbook_dir) || exit 1
[ -d "$_rb_d/jobs" ] || exit 0
for j in "$_rb_d"/jobs/*; do
  if [ -L "$j" ] || [ ! -d "$j" ]; then continue; fi
  pg=-
  read -r pg _ <"$j/group" 2>/dev/null || pg=-
  if [ -f "$j/status" ]; then
    read -r st <"$j/status" || st=
    state="ended $st"
  elif [ "$pg" != - ] && sig 0 "$pg"; then
    state=running
  else
    state=lost
  fi
  printf '%s %s %s\n' "${j##*/}" "$pg" "$state"
  sed 's/^/=/' "$j/meta" 2>/dev/null
  echo .
done
