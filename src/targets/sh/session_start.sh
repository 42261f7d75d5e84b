# script: session-start.sh
# for: sessions on ssh and container targets
# session_start.sh: starts runbook's read-eval loop (session.sh, given as $1) under
# bash where the target has it, else in this shell. bash's job control gives every
# command a process group of its own as it forks, where dash and busybox ash need a
# second exec per command (setsid; see session.sh). `--posix`: a non-interactive bash
# would read the file named by $BASH_ENV first. bash also changes SHLVL in the
# environment it passes on: the loop puts back what this shell had (the words after it).
if command -v bash >/dev/null 2>&1; then
  # shellcheck disable=SC3028
  exec bash --posix -c "$1" sh "${SHLVL-}" "${SHLVL+set}"
fi
eval "$1"
