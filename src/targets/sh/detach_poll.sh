# script: detach-poll.sh
# for: commands with `detach = true` (and those whose timeout is over 5 minutes)
# made of: runbook_dir.sh signal.sh detach_lib.sh detach_poll.sh
# detach_poll.sh JOB OUT ERR WAIT: what the detached command JOB wrote past byte OUT of
# its stdout and byte ERR of its stderr, waiting up to WAIT seconds for something new.
# Prints one line "NOUT NERR STATE", then NOUT bytes of stdout and NERR bytes of stderr
# (at most 1 MiB each: the rest comes with the next poll). STATE:
#   run      it is still running, or there is more output to read
#   exit N   it ended with status N and all its output has been read
#   lost     it is gone without an exit status (its supervisor was killed)
# Exits 3 when the job is not there (never started here, or already collected).
j=$(job_dir "$1") || exit
off_o=$2 off_e=$3 wait=$4
[ -d "$j" ] || { echo "runbook: no job $1 here ($j is gone)" >&2; exit 3; }
read -r pg _ <"$j/group" || pg=
cap=1048576
i=0
while :; do
  done=
  [ ! -f "$j/status" ] || done=1
  so=$(num "$j/out") se=$(num "$j/err")
  if [ -n "$done" ] || [ "$so" -gt "$off_o" ] || [ "$se" -gt "$off_e" ] || [ "$i" -ge $((wait * 5)) ]; then
    break
  fi
  # The command and its supervisor gone and no status: nothing will ever write one.
  if [ -n "$pg" ] && ! sig 0 "$pg" && [ ! -f "$j/status" ]; then
    sleep 0.2 2>/dev/null || sleep 1
    [ -f "$j/status" ] || { done=lost; break; }
  fi
  sleep 0.2 2>/dev/null || sleep 1
  i=$((i + 1))
done
no=$((so - off_o)) ne=$((se - off_e))
if [ "$no" -lt 0 ] || [ "$ne" -lt 0 ]; then
  echo "runbook: job $1's output is shorter than what was read of it" >&2
  exit 1
fi
[ "$no" -le "$cap" ] || no=$cap
[ "$ne" -le "$cap" ] || ne=$cap
state=run
if [ "$done" = lost ]; then
  state=lost
elif [ -n "$done" ] && [ $((off_o + no)) -eq "$so" ] && [ $((off_e + ne)) -eq "$se" ]; then
  read -r st <"$j/status" || st=
  state="exit $st"
fi
printf '%s %s %s\n' "$no" "$ne" "$state"
[ "$no" -eq 0 ] || tail -c +$((off_o + 1)) -- "$j/out" | head -c "$no"
[ "$ne" -eq 0 ] || tail -c +$((off_e + 1)) -- "$j/err" | head -c "$ne"
