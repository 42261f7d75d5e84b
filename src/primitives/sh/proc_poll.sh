# script: proc-poll.sh
# for: proc.wait_for
# made of: runbook_dir.sh proc_lib.sh proc_poll.sh
# args: file offset wait_s max_bytes job
# proc_poll.sh FILE OFFSET WAIT MAX [JOB]: OFFSET a byte offset or `end`; waits up to WAIT
# seconds for FILE to grow past OFFSET, and no longer than the job named JOB (a name
# proc.spawn gave) runs, then prints `START EXISTS STATE` and up to MAX bytes from START
# (START is 0 again when the file shrank: it was replaced or truncated). STATE is `-`
# without a JOB, `up PID` while it runs, `gone PID` once its whole process group has
# exited (`gone -` when its pid file is not there: proc.stop removed it). The job is
# looked at before the file is measured: what it wrote before it was seen gone is read.
f=$1 o=$2 n=${5:-} i=0 job=- a=1 pf=''
sz() { s=0 e=0; [ -e "$f" ] || return 0; e=1; s=$(wc -c < "$f" 2>/dev/null); s=$((s+0)); }
# look: sets job and a (1 while the job runs, or when there is no job to look at).
look() {
  [ -n "$n" ] || return 0
  p='' t=''
  [ -r "$pf" ] && read -r p t < "$pf"
  case $p in ''|*[!0-9]*) job='gone -' a=0; return 0 ;; esac
  if up "$p" "$t"; then job="up $p" a=1; else job="gone $p" a=0; fi
}
[ "$o" = end ] && { sz; echo "$s $e"; exit 0; }
if [ -n "$n" ]; then d=$(runbook_dir) || exit 1; pf=$d/proc-$n.pid; no_link "$pf" || exit 1; fi
look; sz
while [ "$a" = 1 ] && [ "$s" -eq "$o" ] && [ "$i" -lt "$3" ]; do sleep 1; i=$((i+1)); look; sz; done
[ "$s" -lt "$o" ] && o=0
echo "$o $e $job"
[ "$s" -le "$o" ] || tail -c +$((o + 1)) "$f" | head -c "$4"
