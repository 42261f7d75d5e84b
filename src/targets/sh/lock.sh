# script: lock.sh
# for: run locks
# made of: runbook_dir.sh lock.sh
# lock.sh WAIT WHO NODE LOCK... (after runbook_dir.sh):
# Takes the run's locks (waiting up to WAIT seconds in all), records who holds each next
# to it, answers `locked` (or `busy LOCK HOLDER`, or `error: WHY`), then holds them until
# stdin closes. The lock files are the target's own choice: `$RUNBOOK_LOCK_FILE` in its
# environment, else `lock` in `runbook_dir`; NODE (when not empty) makes that `…-NODE` (a
# Slurm node's locks: nodes often share one home, where their locks must still be apart).
#
# Each LOCK is `s:machine` (shared: the machine itself, which every run takes),
# `x:machine` (exclusive: `lock = "machine"`), or `x:NAME` (the runbook's own lock and
# named locks). The machine lock is the base file itself, so runs of an older runbook
# (which locked it whole) and of this one still exclude each other; NAME's is `BASE.NAME`.
# Locks are taken in the order given, all or none: a run that cannot have them all lets
# go of what it took and tries again a second later, so two runs never deadlock.
#
# With `flock` (util-linux, or busybox's applet) the kernel lets go when the holder dies.
# Without it (Debian's busybox-static), a lock is a directory made by the atomic `mkdir`,
# owned by this shell (`owner`: its pid and start time, field 22 of /proc/PID/stat): one
# whose owner is gone, or whose pid now belongs to a later process, is stale and taken
# over. The machine lock's shared holders are files in `BASE.s/`, one per holder.
wait=$1; who=$2; node=$3; shift 3
if [ -n "${RUNBOOK_LOCK_FILE:-}" ]; then base=$RUNBOOK_LOCK_FILE
else d=$(runbook_dir 2>&1) || { echo "error: $d"; exit 0; }; base=$d/lock; fi
[ -z "$node" ] || base=$base-$node
umask 077
# What a refused run is told: who holds it, and since when (this target's clock).
since=$(date -u '+%Y-%m-%d %H:%M:%S UTC' 2>/dev/null) || since='an unknown time'
held_by="$who, since $since"

# file_of LOCK: the file (flock) or the name the mkdir lock is made from.
file_of() { case ${1#?:} in machine) printf '%s' "$base" ;; *) printf '%s' "$base.${1#?:}" ;; esac; }

for l in "$@"; do
  f=$(file_of "$l")
  for p in "$f" "$f.holder"; do [ ! -L "$p" ] || { echo "error: $p is a symbolic link; refusing to write through it"; exit 0; }; done
done

if command -v flock >/dev/null 2>&1; then
  mode='flock'
  # One descriptor per lock, from 3 (runbook passes at most 7). A failed redirection
  # would end `sh` silently, hence the probe in a subshell.
  fd=3
  for l in "$@"; do
    f=$(file_of "$l")
    ( : >>"$f" ) 2>/dev/null || { echo "error: cannot open $f"; exit 0; }
    eval "exec $fd>>\"\$f\""
    fd=$((fd + 1))
  done
else
  mode='mkdir'
fi

# start_of PID: its start time (clock ticks after boot), `-` without /proc. The command
# name may hold spaces and parentheses: the fields are counted from the last `) `.
start_of() {
  _s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo -; return; }
  _s=${_s##*) }
  # shellcheck disable=SC2086
  set -- $_s
  eval "echo \${20}"
}
self="$$ $(start_of $$)"

# alive "PID START": that very process still runs (a reused pid has another start time).
alive() {
  # shellcheck disable=SC2086
  set -- $1
  [ -n "${1:-}" ] || return 1
  kill -0 "$1" 2>/dev/null || [ -d "/proc/$1" ] || return 1
  [ "${2:--}" = - ] || [ "$(start_of "$1")" = "$2" ]
}

# held DIR: a mkdir lock that a live owner holds. A directory without an owner yet is
# being taken right now, unless it is older than a minute (its taker died in between).
held() {
  [ -d "$1" ] || return 1
  _o=$(cat "$1/owner" 2>/dev/null)
  if [ -z "$_o" ]; then [ -z "$(find "$1" -prune -mmin +1 2>/dev/null)" ]; return; fi
  alive "$_o"
}

# take_dir DIR: the exclusive mkdir lock, taking over a stale one. The stale one is moved
# aside first (a rename is atomic) and removed only if it is still the one found stale.
take_dir() {
  if mkdir "$1" 2>/dev/null; then printf '%s\n' "$self" >"$1/owner"; return 0; fi
  held "$1" && return 1
  _was=$(cat "$1/owner" 2>/dev/null)
  mv "$1" "$1.stale.$$" 2>/dev/null || return 1
  if [ "$(cat "$1.stale.$$/owner" 2>/dev/null)" != "$_was" ]; then
    # Another run took it over in between: give it back.
    [ -e "$1" ] || mv "$1.stale.$$" "$1" 2>/dev/null
    return 1
  fi
  rm -rf "$1.stale.$$"
  mkdir "$1" 2>/dev/null || return 1
  printf '%s\n' "$self" >"$1/owner"
}

# shared_live DIR: some shared holder in DIR still runs (entries of dead ones are removed);
# prints what the first live one says of itself. Each entry is `PID START`, then (once it
# holds all its locks) who it is.
shared_live() {
  _live=1
  for _e in "$1"/*; do
    [ -f "$_e" ] || continue
    _o=$(cat "$_e" 2>/dev/null)
    if alive "$_o"; then
      case $_o in *"
"*) [ "$_live" = 0 ] || printf '%s' "${_o#*
}"; _live=0 ;; esac
      _live=0
    else
      rm -f "$_e"
    fi
  done
  return $_live
}

# holder_of LOCK: who holds it, as they recorded it: the machine lock's shared holders in
# `BASE.s/`, every other holder in `FILE.holder`.
holder_of() {
  _f=$(file_of "$1")
  case $1 in
    ?:machine) [ -d "$_f.s" ] && _h=$(shared_live "$_f.s") && [ -n "$_h" ] && { printf '%s' "$_h"; return; } ;;
  esac
  cat "$_f.holder" 2>/dev/null
}

# take N LOCK: one attempt at LOCK (the Nth, descriptor N+2).
take() {
  _f=$(file_of "$2")
  if [ "$mode" = flock ]; then
    case $2 in s:*) flock -n -s $(($1 + 2)) ;; *) flock -n -x $(($1 + 2)) ;; esac
    return
  fi
  case $2 in
    s:*)
      mkdir "$_f.s" 2>/dev/null
      [ -d "$_f.s" ] && [ ! -L "$_f.s" ] || return 1
      printf '%s\n' "$self" >"$_f.s/$$"
      if held "$_f.d"; then rm -f "$_f.s/$$"; return 1; fi ;;
    x:machine)
      take_dir "$_f.d" || return 1
      if [ -d "$_f.s" ] && shared_live "$_f.s" >/dev/null; then rm -rf "$_f.d"; return 1; fi ;;
    *) take_dir "$_f.d" ;;
  esac
}

# give N LOCK: lets go of LOCK.
give() {
  _f=$(file_of "$2")
  if [ "$mode" = flock ]; then flock -u $(($1 + 2)); return; fi
  case $2 in s:*) rm -f "$_f.s/$$" ;; *) rm -rf "$_f.d" ;; esac
}

# give_all N: lets go of the first N locks.
give_all() {
  _n=0
  for _l in "$@"; do
    [ "$_n" -lt "$taken" ] || break
    _n=$((_n + 1))
    give "$_n" "$_l"
  done
}

waited=0
while :; do
  taken=0; busy=
  for l in "$@"; do
    if take $((taken + 1)) "$l"; then taken=$((taken + 1)); else busy=$l; break; fi
  done
  [ -n "$busy" ] || break
  give_all "$@"
  if [ "$waited" -ge "$wait" ]; then
    printf 'busy %s %s\n' "${busy#?:}" "$(holder_of "$busy")"
    exit 0
  fi
  sleep 1
  waited=$((waited + 1))
done
for l in "$@"; do
  f=$(file_of "$l")
  case $l in
    # (Entries of holders long gone are removed on the way: with flock, nobody else does.)
    s:*) mkdir "$f.s" 2>/dev/null; shared_live "$f.s" >/dev/null; printf '%s\n%s\n' "$self" "$held_by" >"$f.s/$$" ;;
    *) printf '%s\n' "$held_by" >"$f.holder" ;;
  esac
done
echo locked
if [ "$mode" = flock ]; then exec cat >/dev/null; fi
# A mkdir lock has no kernel to let go of it: this shell does, when stdin closes or a
# signal ends it (one that kills it outright leaves a stale lock the next run takes over).
# (`cat` waits in the background, so that a signal is handled at once: a shell runs its
# traps only between commands; it reads stdin through 3, as a command started with `&`
# gets /dev/null for its stdin before its own redirections.)
trap 'give_all "$@"; exit 0' HUP INT TERM PIPE
exec 3<&0
cat <&3 >/dev/null &
wait $!
give_all "$@"
