# script: session.sh
# for: sessions on ssh and container targets
# session.sh: runbook's read-eval loop on a target (`bash --posix -c SCRIPT sh [SHLVL
# set]` by session_start.sh, or `sh -c SCRIPT sh` where there is no bash), one per SSH
# channel or container exec, so that a command costs a fork and an exec instead of a new
# SSH session, a login shell and a `pct exec` (see targets/session.rs).
#
# Input (from runbook only: no command ever reads it): requests, each a shell script of
# lines that start with "=", ended by a line ".". A script calls `_rb_run` once; the
# words in it were quoted by runbook's quote.rs. A command's stdin follows its request
# as lines "=DATA" (DATA escaped for printf %b), ended by ".".
#
# Output: the command's own stdout and stderr, as it writes them, framed by lines that
# start with \036 and the command's TOKEN (random, fresh per command, never in any argv
# or environment, so a command cannot print its own frame's end). A command (MODE g)
# writes to FIFOs of its own, never used before, that a `cat` each copies to the
# channel; the loop writes the frame's end into them too, after the command ended, and
# ends those cats before the next command begins: whatever the command left running
# that still holds them (`(sleep 1; echo late) &`) writes into a pipe nobody reads any
# more, and never into another command's output.
#   stderr  TOKEN pgid PGID BOOT_ID STAT_LINE   the group, before the command starts
#   stdout  TOKEN begin / stderr TOKEN begin    what came before is not the command's
#   stdout  TOKEN end STATUS / stderr TOKEN end the command ended with STATUS
# The loop prints "\036runbook-session ready 1" when it is ready, or
# "\036runbook-session cannot WHY" and exits when this target cannot host it.
# The loop's own variables are all _rb_*, and none of them is exported: an _rb_* that
# came in the environment is unset first, so no command gets one (runbook refuses to
# set one: session::unsuited).
unset _rb_nl _rb_rs _rb_jc _rb_boot _rb_proc _rb_dir _rb_f _rb_in _rb_l _rb_q _rb_t _rb_m \
  _rb_i _rb_d _rb_s _rb_p _rb_st _rb_x _rb_a _rb_b _rb_n _rb_o _rb_e _rb_fw _rb_j _rb_pb
_rb_nl='
'
_rb_rs=$(printf '\036')
# A command's own process group: bash with job control (`set -m`, which needs no
# terminal there) puts each job, a background subshell, in a group of its own as it
# forks, at no cost. dash
# and busybox ash turn job control off without a terminal, so there the command's
# process execs setsid first: a second exec per command, about as dear as the command's
# own (bench/RESULTS.md). runbook starts the loop under bash where there is one.
# Job control has bash report stopped and ended jobs on its own stderr, so the loop's
# own is /dev/null: fd 3 is the channel's.
exec 3>&2 2>/dev/null
_rb_jc=
if [ -n "${BASH_VERSION:-}" ] && set -m; then
  _rb_jc=1
  # What session_start.sh found: a command gets the SHLVL the loop was given (bash's
  # exec takes one off it first; where there was none, a command sees SHLVL=0).
  # shellcheck disable=SC3028
  case ${2-}:${1-} in
    set:*[!0-9]* | set:) ;;
    set:*) SHLVL=$(($1 + 1)) && export SHLVL ;;
  esac
elif ! command -v setsid >/dev/null 2>&1; then
  printf '\036runbook-session cannot needs setsid (util-linux or busybox) or bash\n'
  exit 0
fi
_rb_boot=-
IFS= read -r _rb_boot 2>/dev/null </proc/sys/kernel/random/boot_id || _rb_boot=-
# Without /proc a command cannot read its own pid: a `sh -c` reports `$$` instead.
_rb_proc=1
[ -r /proc/self/stat ] || _rb_proc=
_rb_dir='' _rb_f='' _rb_in='' _rb_fw='' _rb_n=0 _rb_m=0
# At the end the last command's cats are left to end by themselves: runbook ends a
# session only when it read its last frame to its end, and what they copy after that
# goes to a channel nobody reads.
trap '[ -z "$_rb_dir" ] || rm -rf -- "$_rb_dir"' EXIT
trap 'exit 129' HUP
trap 'exit 141' PIPE
trap 'exit 143' TERM
# The private directory (mktemp -d: 0700, a name nobody can guess) for the commands'
# FIFOs and stdin files.
if command -v mkfifo >/dev/null 2>&1; then
  _rb_dir=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/runbook-session.XXXXXXXXXX" 2>/dev/null) || _rb_dir=
fi
if [ -z "$_rb_dir" ] || [ ! -d "$_rb_dir" ]; then
  _rb_dir=
  printf '\036runbook-session cannot needs mktemp and mkfifo (a private directory for each command'"'"'s own streams)\n'
  exit 0
fi

# _rb_pipes: sets _rb_o and _rb_e to a pair of FIFOs never used before. They are made
# 16 pairs at a time (one mkfifo), the used ones removed then: a name is never used
# twice, so a writer an earlier command left holding its FIFO never reaches a later
# command.
_rb_pipes() {
  if [ "$_rb_n" -ge "$_rb_m" ]; then
    rm -f -- "$_rb_dir"/o* "$_rb_dir"/e*
    set --
    while [ "$_rb_m" -lt $((_rb_n + 16)) ]; do
      _rb_m=$((_rb_m + 1))
      set -- "$@" "$_rb_dir/o$_rb_m" "$_rb_dir/e$_rb_m"
    done
    mkfifo -m 600 "$@" || { _rb_m=$_rb_n; return 1; }
  fi
  _rb_n=$((_rb_n + 1))
  _rb_o=$_rb_dir/o$_rb_n _rb_e=$_rb_dir/e$_rb_n
}

# _rb_unfwd: ends the cats that copy the last command's streams (they are still there
# when something it left running holds its FIFOs open) and waits for them, so nothing
# of that command reaches the channel after this. runbook sends a request only once it
# read the end of the last frame on both streams, so they have copied all of it. Only
# the loop's own children: a cat that ended may have given its pid to another process
# since.
_rb_unfwd() {
  for _rb_j in $_rb_fw; do
    _rb_s=
    if [ -n "$_rb_proc" ]; then
      IFS= read -r _rb_s 2>/dev/null <"/proc/$_rb_j/stat" || _rb_s=
      _rb_s=${_rb_s##*') '}
      case $_rb_s in
        ?" $$ "*) kill -s KILL "$_rb_j" 2>/dev/null ;;
        *) ;;
      esac
    else
      kill -s KILL "$_rb_j" 2>/dev/null
    fi
    wait "$_rb_j" 2>/dev/null
  done
  _rb_fw=
}

# _rb_stdin: reads the command's stdin (the "=DATA" lines up to ".") into a file in a
# private directory (mktemp -d: 0700, a name nobody can guess), opens it as fd 4 and
# removes it, so nothing is left behind whatever happens to the command.
_rb_stdin() {
  _rb_f=/dev/null _rb_in=bad
  if [ -d "$_rb_dir" ]; then _rb_f=$_rb_dir/stdin _rb_in=; fi
  _rb_l=
  while IFS= read -r _rb_l && [ "$_rb_l" != . ]; do
    printf '%b' "${_rb_l#=}"
  done >"$_rb_f"
  # Input that ends before the stdin did (runbook gave up on the session while sending):
  # the command must not run with half its stdin.
  [ "$_rb_l" = . ] || exit 0
  exec 4<"$_rb_f"
  [ "$_rb_f" = /dev/null ] || rm -f -- "$_rb_f"
}

# _rb_run TOKEN MODE STDIN CWD [NAME VALUE]... -- ARGV...
#   MODE  g: ARGV runs in a process group of its own (job control's, or a new session's
#         by setsid) and the group is reported; p: runbook's own short command, as is
#   STDIN 1: read by _rb_stdin first; 0: /dev/null
#   CWD   "-" or "+DIR"
# The command's process is a subshell running _rb_child. Without job control it is a
# foreground subshell, not `&`: a background job of a shell without job control would
# ignore SIGINT and SIGQUIT. With it, a background job and `wait` for its pid: job
# control hands back a stopped foreground job at once (as 128 + the signal) and may
# drop its status before it ends, where a shell without job control waits on; `wait`
# on a pid returns at a stop too, so the loop waits while /proc says it is stopped.
_rb_run() {
  _rb_t=$1 _rb_i=$3 _rb_d=$4
  # What the command's process does, decided here: after the fork, every variable the
  # child writes costs it a copied page.
  _rb_x=$_rb_jc$2$_rb_proc
  shift 4
  [ -z "$_rb_fw" ] || _rb_unfwd
  if [ "$_rb_i" = 1 ]; then _rb_stdin; else exec 4</dev/null; fi
  # The command's stdout and stderr (fds 5 and 6): its own FIFOs, each copied to the
  # channel by a cat, in MODE g; the channel's in MODE p (runbook's own kills leave
  # nothing behind). The loop opens them read-write, so that no open waits for the
  # other end and a cat sees their end only once the loop closes them too, and opens
  # the cats' read ends itself (7, 8), so that the pipes are there whenever a cat gets
  # to read them.
  _rb_pb=
  case $_rb_x in
    *g*)
      # (Checked to be FIFOs: `<>` would make a missing one a plain file.) Both ends of
      # each FIFO are opened here on purpose:
      # shellcheck disable=SC2094
      if _rb_pipes && [ -p "$_rb_o" ] && [ -p "$_rb_e" ] &&
        exec 5<>"$_rb_o" 6<>"$_rb_e" 7<"$_rb_o" 8<"$_rb_e"; then
        cat <&7 3>&- 4<&- 5>&- 6>&- 7<&- 8<&- &
        _rb_fw=$!
        cat <&8 >&3 3>&- 4<&- 5>&- 6>&- 7<&- 8<&- &
        _rb_fw="$_rb_fw $!"
        exec 7<&- 8<&-
      else
        _rb_pb=1
        exec 5>&1 6>&3
      fi
      ;;
    *) exec 5>&1 6>&3 ;;
  esac
  if [ -n "$_rb_jc" ]; then
    _rb_child "$@" &
    _rb_p=$!
    while :; do
      wait "$_rb_p"
      _rb_st=$?
      case $_rb_st in
        14[5-9] | 150) ;;
        *) break ;;
      esac
      _rb_s=
      IFS= read -r _rb_s <"/proc/$_rb_p/stat" || break
      _rb_s=${_rb_s##*') '}
      case $_rb_s in
        [Tt]*) sleep 1 ;;
        *) ;;
      esac
    done
  else
    (_rb_child "$@")
    _rb_st=$?
  fi
  exec 4<&-
  printf '\036%s end %s\n' "$_rb_t" "$_rb_st" >&5
  printf '\036%s end\n' "$_rb_t" >&6
  exec 5>&- 6>&-
}

# _rb_child ARGV...: in the command's own process (a subshell), reports its pid and
# group, sets the environment and directory, then execs ARGV; without job control it
# execs setsid first, which makes it a session leader in place (a subshell never leads
# a group, so setsid does not fork). _rb_x: job control (1 or not), MODE, /proc (1 or
# not).
_rb_child() {
  exec <&4 4<&- >&5 2>&6 5>&- 6>&- 3>&-
  printf '\036%s begin\n' "$_rb_t"
  # One write for both lines (each write is a packet on its way to runbook): bash's
  # printf writes at every newline of its format, not of a %s argument.
  case $_rb_x in
    *g1)
      IFS= read -r _rb_s </proc/self/stat
      printf '%s' "$_rb_rs$_rb_t begin$_rb_nl$_rb_rs$_rb_t pgid ${_rb_s%% *} $_rb_boot $_rb_s$_rb_nl" >&2
      ;;
    *) printf '\036%s begin\n' "$_rb_t" >&2 ;;
  esac
  [ -z "$_rb_in" ] || { echo "runbook: cannot keep the command's stdin: no private directory in ${TMPDIR:-/tmp} (mktemp -d)" >&2; exit 125; }
  [ -z "$_rb_pb" ] || { echo "runbook: cannot give the command streams of its own: mkfifo in $_rb_dir failed" >&2; exit 125; }
  while [ "$1" != -- ]; do
    export "$1=$2" || exit 125
    shift 2
  done
  shift
  [ "$_rb_d" = - ] || cd -- "${_rb_d#+}" || exit 1
  # shellcheck disable=SC2016,SC3028
  case $_rb_x in
    1g) printf '\036%s pgid %s %s -\n' "$_rb_t" "$BASHPID" "$_rb_boot" >&2 ;;
    g1) exec setsid "$@" ;;
    g) exec setsid sh -c 'printf "\036%s pgid %s %s -\n" "$1" "$$" "$2" >&2; shift 2; exec "$@"' sh "$_rb_t" "$_rb_boot" "$@" ;;
  esac
  exec "$@"
}

printf '\036runbook-session ready 1\n'
_rb_q=
while IFS= read -r _rb_l; do
  case $_rb_l in
    =*) _rb_q=$_rb_q${_rb_l#=}$_rb_nl ;;
    .) eval "$_rb_q"; _rb_q= ;;
    *) printf '\036runbook-session cannot read a request\n'; exit 1 ;;
  esac
done
