# script: proc-poll.sh
# for: proc.wait_for, runbook watch's log triggers
# made of: runbook_dir.sh proc_lib.sh proc_poll.sh
# args: file offset wait_s max_bytes job inode
# proc_poll.sh FILE OFFSET WAIT MAX [JOB [INODE]]: OFFSET a byte offset or `end`; waits up
# to WAIT seconds for FILE to grow past OFFSET, and no longer than the job named JOB (a
# name proc.spawn gave; empty: none) runs, then prints `START EXISTS STATE INODE` and up
# to MAX bytes from START. START is 0 again when the file shrank, or is not the file
# INODE names (when given): it was truncated, or replaced (rotated). STATE is `-` without
# a JOB, `up PID` while it runs, `gone PID` once its whole process group has exited
# (`gone -` when its pid file is not there: proc.stop removed it). INODE is `-` for no
# file. The job is looked at before the file is measured: what it wrote before it was
# seen gone is read.
f=$1 o=$2 n=${5:-} was=${6:-} i=0 job=- a=1 pf=''
sz() {
  s=0 e=0 ino=-
  [ -e "$f" ] || return 0
  e=1; s=$(wc -c < "$f" 2>/dev/null); s=$((s+0))
  # shellcheck disable=SC2012 # only the inode is read, the first word; never the name
  ino=$(ls -di -- "$f" 2>/dev/null | { read -r x _; echo "${x:--}"; })
}
# look: sets job and a (1 while the job runs, or when there is no job to look at).
look() {
  [ -n "$n" ] || return 0
  p='' t=''
  [ -r "$pf" ] && read -r p t < "$pf"
  case $p in ''|*[!0-9]*) job='gone -' a=0; return 0 ;; esac
  if up "$p" "$t"; then job="up $p" a=1; else job="gone $p" a=0; fi
}
[ "$o" = end ] && { sz; echo "$s $e - $ino"; exit 0; }
if [ -n "$n" ]; then d=$(runbook_dir) || exit 1; pf=$d/proc-$n.pid; no_link "$pf" || exit 1; fi
look; sz
while [ "$a" = 1 ] && [ "$s" -eq "$o" ] && [ "$i" -lt "$3" ]; do sleep 1; i=$((i+1)); look; sz; done
if [ -n "$was" ] && [ "$ino" != "$was" ]; then o=0; fi
[ "$s" -lt "$o" ] && o=0
echo "$o $e $job $ino"
[ "$s" -le "$o" ] || tail -c +$((o + 1)) "$f" | head -c "$4"
