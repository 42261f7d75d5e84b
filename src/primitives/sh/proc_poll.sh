# script: proc-poll.sh
# for: proc.wait_for
# proc_poll.sh FILE OFFSET WAIT MAX: OFFSET a byte offset or `end`; waits up to WAIT
# seconds for FILE to grow past OFFSET, then prints `START EXISTS` and up to MAX bytes
# from START (START is 0 again when the file shrank: it was replaced or truncated).
f=$1 o=$2 i=0
sz() { s=0 e=0; [ -e "$f" ] || return 0; e=1; s=$(wc -c < "$f" 2>/dev/null); s=$((s+0)); }
sz; [ "$o" = end ] && { echo "$s $e"; exit 0; }
while [ "$s" -eq "$o" ] && [ "$i" -lt "$3" ]; do sleep 1; i=$((i+1)); sz; done
[ "$s" -lt "$o" ] && o=0
echo "$o $e"
[ "$s" -le "$o" ] || tail -c +$((o + 1)) "$f" | head -c "$4"
