# script: proc-poll.sh
# for: proc.wait_for, runbook watch's log triggers
# proc_poll.sh FILE OFFSET WAIT MAX [INODE]: OFFSET a byte offset or `end`; waits up to
# WAIT seconds for FILE to grow past OFFSET, then prints `START EXISTS INODE` and up to MAX
# bytes from START. START is 0 again when the file shrank, or is not the file INODE names
# (when given): it was truncated, or replaced (rotated). INODE is `-` for no file.
f=$1 o=$2 w=$3 m=$4 was=${5:-} i=0
sz() {
  s=0 e=0 n=-
  [ -e "$f" ] || return 0
  e=1; s=$(wc -c < "$f" 2>/dev/null); s=$((s+0))
  # shellcheck disable=SC2012 # only the inode is read, the first word; never the name
  n=$(ls -di -- "$f" 2>/dev/null | { read -r x _; echo "${x:--}"; })
}
sz; [ "$o" = end ] && { echo "$s $e $n"; exit 0; }
while [ "$s" -eq "$o" ] && [ "$i" -lt "$w" ]; do sleep 1; i=$((i+1)); sz; done
if [ -n "$was" ] && [ "$n" != "$was" ]; then o=0; fi
[ "$s" -lt "$o" ] && o=0
echo "$o $e $n"
[ "$s" -le "$o" ] || tail -c +$((o + 1)) "$f" | head -c "$m"
