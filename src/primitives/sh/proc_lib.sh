# Shared by the proc.* scripts (prepended after runbook_dir.sh).
#
# up PID [START]: the job is alive: some non-zombie process is PID or in its process
# group, and PID, if it still exists, started at START (else the pid was reused). Its
# variables start with _: shell variables are global.
up() {
  if [ ! -d /proc/self ]; then kill -s 0 -- "-$1" 2>/dev/null || kill -s 0 "$1" 2>/dev/null; return; fi
  # The fields after the command name, split on purpose (state is then $3, pgrp $5,
  # start time ${22}).
  if IFS= read -r _l 2>/dev/null < "/proc/$1/stat"; then
    # shellcheck disable=SC2086
    set -- "$1" "$2" ${_l##*) }
    [ -z "$2" ] || [ "${22}" = "$2" ] || return 1
  fi
  for _f in /proc/[0-9]*/stat; do
    IFS= read -r _l 2>/dev/null < "$_f" || continue
    # shellcheck disable=SC2086
    set -- "$1" "$2" ${_l##*) }
    [ "$3" != Z ] && { [ "$5" = "$1" ] || [ "$_f" = "/proc/$1/stat" ]; } && return 0
  done; return 1
}

# no_link FILE: fails, saying so, when FILE is a symbolic link (a pid file is never one;
# following it would read or replace some other file).
no_link() { [ ! -L "$1" ] || { echo "runbook: $1 is a symbolic link; refusing it" >&2; return 1; }; }
