# script: detach-end.sh
# for: commands with `detach = true`, `runbook stop`
# made of: runbook_dir.sh signal.sh detach_lib.sh detach_end.sh
# detach_end.sh JOB MODE: MODE "reap" removes the directory of a job whose end was
# read; "stop" first stops its command's whole process group (TERM, up to 2 s, KILL),
# then removes it. Prints "stopped" when it stopped a running command, else "gone".
j=$(job_dir "$1") || exit
[ -d "$j" ] || { echo gone; exit 0; }
said=gone
if [ "$2" = stop ] && [ ! -f "$j/status" ] && read -r pg _ <"$j/group" 2>/dev/null && [ -n "$pg" ]; then
  if sig TERM "$pg"; then
    said=stopped
    i=0
    while sig 0 "$pg" && [ "$i" -lt 20 ]; do
      sleep 0.1 2>/dev/null || sleep 1
      i=$((i + 1))
    done
    sig KILL "$pg" || :
  fi
  # The supervisor writes the status once its command is gone.
  i=0
  while [ ! -f "$j/status" ] && [ "$i" -lt 20 ]; do
    sleep 0.1 2>/dev/null || sleep 1
    i=$((i + 1))
  done
fi
rm -rf -- "$j"
echo "$said"
