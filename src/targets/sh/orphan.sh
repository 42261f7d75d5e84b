# script: orphan.sh
# for: runbook run --resume
# made of: signal.sh orphan.sh
# Finds out whether a command an earlier run started still runs, and stops it.
# Runs as `sh -c SCRIPT sh PGID START BOOT MODE` on the target (inside the container for
# one), through the same hops the command was started through.
#   PGID   the command's process group (= the pid of its leader)
#   START  the leader's start time then: field 22 of /proc/PGID/stat ("-": unknown)
#   BOOT   /proc/sys/kernel/random/boot_id then ("-": unknown)
#   MODE   "check" (only look) or "stop" (TERM the group, wait 2 s, KILL)
# Prints one word:
#   gone      nothing of that group runs (or the machine rebooted since)
#   other     PGID is now the pid of a different process: ours ended, its number was reused
#   unsure    the group runs but its leader is gone, so nothing proves it is the same one
#   running   it runs, and it is that very group (MODE check)
#   stopped   it ran and stopped after TERM; killed: it needed KILL; survived: even that failed
# Every variable is this script's own: it runs in a fresh `sh`.
g=$1 t=$2 b=$3 mode=$4

# sig SIGNAL GROUP comes from signal.sh, which orphans.rs puts in front.
# live GROUP: true while some process other than a zombie is in GROUP. `kill -0` alone
# counts zombies, whose group no command lives in any more. Scans all of /proc: use it
# sparingly.
live() {
  sig 0 "$1" || return 1
  [ -d /proc/self ] || return 0
  for f in /proc/[0-9]*/stat; do
    IFS= read -r l 2>/dev/null <"$f" || continue
    # The fields after "pid (comm) ": state, ppid, pgrp, … (comm may hold spaces).
    # shellcheck disable=SC2086
    set -- "$1" ${l##*) }
    [ "$2" != Z ] && [ "$4" = "$1" ] && return 0
  done
  return 1
}

if [ ! -d /proc/self ]; then
  # No /proc: nothing can prove who the group is.
  if live "$g"; then echo unsure; else echo gone; fi
  exit 0
fi
now=-
IFS= read -r now 2>/dev/null </proc/sys/kernel/random/boot_id
if [ "$b" != - ] && [ "$now" != - ] && [ "$now" != "$b" ]; then
  # Rebooted since: everything that run started ended with that boot, and any process
  # with the number now is another one.
  echo gone
  exit 0
fi
leader=
IFS= read -r l 2>/dev/null <"/proc/$g/stat" && leader=$l
if [ -n "$leader" ] && [ "$t" != - ]; then
  # shellcheck disable=SC2086
  set -- ${leader##*) }
  # A pid is only reused once nothing holds it, as a pid or as a group: a leader that
  # started at another time means the recorded group ended.
  if [ "${20}" != "$t" ]; then echo other; exit 0; fi
fi
if ! live "$g"; then echo gone; exit 0; fi
# It runs. Only its leader, started when the record says, proves it is that group.
if [ -z "$leader" ] || [ "$t" = - ]; then echo unsure; exit 0; fi
if [ "$mode" != stop ]; then echo running; exit 0; fi

# wait_gone: waits up to 2 s for the group to go. `kill -0` while waiting (the full scan
# in `live` costs a few hundred reads per process with dash's `read`), one scan at the end
# so that a zombie left unreaped does not count.
wait_gone() {
  i=0
  while sig 0 "$g" && [ "$i" -lt 20 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  ! live "$g"
}
sig TERM "$g"
if wait_gone; then echo stopped; exit 0; fi
sig KILL "$g"
if wait_gone; then echo killed; else echo survived; fi
