# script: session.sh
# for: sessions on ssh and container targets
# session.sh: runbook's read-eval loop on a target (`bash --posix -c SCRIPT sh [SHLVL
# set]` by session_start.sh, or `sh -c SCRIPT sh` where there is no bash), one per SSH
# channel or container exec, so that a command costs a fork and an exec instead of a new
# SSH session, a login shell and a `pct exec` (see targets/session.rs).
#
# Input (from runbook only: no command ever reads it): requests, each the words
#   TOKEN MODE STDIN CWD [NAME VALUE]... -- ARGV...
# quoted by runbook's quote.rs, on a line that starts with "!" or, where a word holds a
# newline, on lines that start with "=" ended by a line ".":
#   MODE  g: ARGV runs in a process group of its own (job control's, or a new session's
#         by setsid) and the group is reported; p: runbook's own short command, as is
#   STDIN 1: its stdin follows, as lines "=DATA" (DATA escaped for printf %b) ended by
#         "."; 0: /dev/null
#   CWD   "-" or "+DIR"
# The loop runs a request in the loop itself, not in a function, and the common one
# (MODE g, no stdin, env or cwd) on a path of its own with as few commands as it
# takes: each costs bash thousands of instructions, a function call copies the
# function's body, and every page a shell writes after a fork costs it a fault (and a
# copy while the child lives).
#
# Output: the command's own stdout and stderr, as it writes them, framed by lines that
# start with \036 and the command's TOKEN (random, fresh per command, never in any argv
# or environment, so a command cannot print its own frame's end):
#   stderr  TOKEN pgid PGID BOOT_ID STAT_LINE   the group, before the command starts
#   stdout  TOKEN begin / stderr TOKEN begin    what came before is not the command's
#   stdout  TOKEN end STATUS / stderr TOKEN end the command ended with STATUS
# A command (MODE g) writes to FIFOs of its own that a `cat` each copies to the channel;
# the loop writes the frame's end into them too, after the command ended. Before the
# next command begins, each cat has either gone on to the next command's FIFO, which it
# opens only once it read this one to its end (nothing holds it open for writing any
# more), or it is ended: whatever the command left running that still holds its FIFOs
# (`(sleep 1; echo late) &`) writes into a pipe nobody reads any more, and never into
# another command's output. A FIFO read to its end that way is used again (no process
# can write into it any more: a command gets no other end of it); one whose cat was
# ended never is. A cat serves many commands (its argv names the FIFOs to come as
# /proc/LOOP/fd/N, so that a cat whose loop is gone finds none and ends); without /proc
# each command gets two cats and two FIFOs, never used before, of its own.
# The loop prints "\036runbook-session ready 1" when it is ready, or
# "\036runbook-session cannot WHY" and exits when this target cannot host it.
# The loop's own variables are all _rb_*, and none of them is exported: an _rb_* that
# came in the environment is unset first, so no command gets one (runbook refuses to
# set one: session::unsuited).
# `[ A -ef B ]` (the same file) is not POSIX, but bash, dash and busybox ash all have it.
# shellcheck disable=SC3013
unset _rb_nl _rb_rs _rb_jc _rb_boot _rb_proc _rb_dir _rb_f _rb_in _rb_l _rb_q _rb_t _rb_m \
  _rb_i _rb_d _rb_s _rb_p _rb_st _rb_x _rb_a _rb_n _rb_o _rb_e _rb_fw _rb_j _rb_pb _rb_so \
  _rb_se _rb_nf _rb_uf _rb_u _rb_wo _rb_we _rb_co _rb_ce _rb_zo _rb_ze _rb_ok _rb_o5 _rb_e5 \
  _rb_o7 _rb_e7 _rb_c5 _rb_c7 _rb_c6 _rb_c8 _rb_w _rb_sl _rb_cc _rb_z _rb_sp
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
# own is /dev/null: fd 3 is the channel's. fd 4 is the command's stdin: /dev/null
# unless it has one.
exec 3>&2 2>/dev/null 4</dev/null
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
# (/proc/$$ must be the loop's own: the cats name the loop's fds by it.)
_rb_proc=1
[ -r /proc/self/stat ] && [ "/proc/$$/fd/3" -ef /proc/self/fd/3 ] || _rb_proc=
_rb_dir='' _rb_in='' _rb_fw='' _rb_n=0 _rb_m=0 _rb_nf='' _rb_uf='' _rb_u=0 _rb_co='' \
  _rb_ce='' _rb_zo=0 _rb_ze=0 _rb_z=0 _rb_cc='' _rb_sl='' _rb_sp='' _rb_wo='' _rb_we='' \
  _rb_ok='' _rb_o5='' _rb_e5='' _rb_o7='' _rb_e7=''
# The cats' argvs (see _rb_cats): the loop's fds of the FIFOs to come, in turn from 5
# (or 7) for stdout, from 6 (or 8) for stderr, 256 each.
_rb_c5="/proc/$$/fd/5 /proc/$$/fd/7" _rb_c7="/proc/$$/fd/7 /proc/$$/fd/5"
_rb_c6="/proc/$$/fd/6 /proc/$$/fd/8" _rb_c8="/proc/$$/fd/8 /proc/$$/fd/6"
_rb_i=1
while [ "$_rb_i" -lt 128 ]; do
  _rb_c5="$_rb_c5 $_rb_c5" _rb_c7="$_rb_c7 $_rb_c7" _rb_c6="$_rb_c6 $_rb_c6" _rb_c8="$_rb_c8 $_rb_c8"
  _rb_i=$((_rb_i * 2))
done
# At the end the cats are left to end by themselves: runbook ends a session only when
# it read its last frame to its end, and what they copy after that goes to a channel
# nobody reads. With the loop's fds gone, a cat reads to the end of its FIFO and finds
# none of the rest.
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

# _rb_kill PID...: ends cats of the loop and waits for them. Only the loop's own
# children: a cat that ended may have given its pid to another process since.
_rb_kill() {
  for _rb_j in "$@"; do
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
}

# Without /proc: _rb_pipes sets _rb_o and _rb_e to a pair of FIFOs never used before.
# They are made 16 pairs at a time (one mkfifo), the used ones removed then: a name is
# never used twice, so a writer an earlier command left holding its FIFO never reaches
# a later command.
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

# With /proc, the loop holds each command's FIFOs open (read-write, so that no open
# waits) on fds 5 and 6 or 7 and 8, in turn: while one pair is the last command's, the
# next is opened on the others. A cat copies one stream's FIFOs in that order; it opens
# the next only when it read the last to its end, which comes once the command,
# whatever it left running and the loop all closed it. The loop closes its own end only
# once the cat has that FIFO open (else the cat would find it gone), and only after it
# opened the next pair.
#   _rb_nf  5 or 7: where the next pair is open; empty: none is
#   _rb_uf  5 or 7: where the last command's pair is, until the next request;
#           _rb_wo, _rb_we: the loop's end of its FIFO is still open there
#   _rb_sl  set where the next request cannot settle at a glance (see the loop);
#           _rb_sp: set where it may take the loop's short path
#   _rb_u   how many pairs commands used; _rb_co, _rb_ce: the cats of stdout and
#           stderr, _rb_zo, _rb_ze: the number of the last pair each copies, _rb_z the
#           smaller; _rb_cc: both cats are there; _rb_ok: both are known to have the
#           pair in use open
#   _rb_o5 _rb_e5 / _rb_o7 _rb_e7  the FIFOs opened on 5 and 6 / 7 and 8

# _rb_pair: sets _rb_o and _rb_e to a new pair of FIFOs (a number never used before),
# made and checked to be FIFOs.
_rb_pair() {
  _rb_n=$((_rb_n + 1))
  _rb_o=$_rb_dir/o$_rb_n _rb_e=$_rb_dir/e$_rb_n
  mkfifo -m 600 "$_rb_o" "$_rb_e" && [ -p "$_rb_o" ] && [ -p "$_rb_e" ]
}

# _rb_open: opens the next pair, on the fds the last one does not use; its FIFOs are
# made anew where they were retired (or are gone).
_rb_open() {
  if [ "$_rb_uf" = 5 ]; then
    if ! [ -p "$_rb_o7" ] || ! [ -p "$_rb_e7" ]; then
      _rb_pair || return 1
      _rb_o7=$_rb_o _rb_e7=$_rb_e
    fi
    # (Checked to be FIFOs: `<>` would make a missing one a plain file.)
    # shellcheck disable=SC2094
    exec 7<>"$_rb_o7" 8<>"$_rb_e7"
    _rb_nf=7
  else
    if ! [ -p "$_rb_o5" ] || ! [ -p "$_rb_e5" ]; then
      _rb_pair || return 1
      _rb_o5=$_rb_o _rb_e5=$_rb_e
    fi
    # shellcheck disable=SC2094
    exec 5<>"$_rb_o5" 6<>"$_rb_e5"
    _rb_nf=5
  fi
}

# _rb_shut FD: closes the loop's end of one FIFO of a pair.
_rb_shut() {
  case $1 in
    5) exec 5>&- ;;
    6) exec 6>&- ;;
    7) exec 7>&- ;;
    8) exec 8>&- ;;
    *) ;;
  esac
}

# _rb_cats: starts a cat for each stream that has none, from the next pair on: its argv
# names the loop's fds of the pairs to come, in turn, 256 of them. One it replaces
# (its list ends) is ended at the next request, once it copied the frame's end.
_rb_cats() {
  if [ -z "$_rb_co" ] || [ "$_rb_zo" -le "$_rb_u" ]; then
    [ -z "$_rb_co" ] || _rb_fw="$_rb_fw $_rb_co"
    # shellcheck disable=SC2086
    case $_rb_nf in
      5) cat $_rb_c5 </dev/null 3>&- 4<&- 5>&- 6>&- 7>&- 8>&- & ;;
      *) cat $_rb_c7 </dev/null 3>&- 4<&- 5>&- 6>&- 7>&- 8>&- & ;;
    esac
    _rb_co=$! _rb_zo=$((_rb_u + 256)) _rb_ok=
  fi
  if [ -z "$_rb_ce" ] || [ "$_rb_ze" -le "$_rb_u" ]; then
    [ -z "$_rb_ce" ] || _rb_fw="$_rb_fw $_rb_ce"
    # shellcheck disable=SC2086
    case $_rb_nf in
      5) cat $_rb_c6 </dev/null >&3 3>&- 4<&- 5>&- 6>&- 7>&- 8>&- & ;;
      *) cat $_rb_c8 </dev/null >&3 3>&- 4<&- 5>&- 6>&- 7>&- 8>&- & ;;
    esac
    _rb_ce=$! _rb_ze=$((_rb_u + 256)) _rb_ok=
  fi
  _rb_cc=1 _rb_z=$_rb_zo
  [ "$_rb_ze" -ge "$_rb_z" ] || _rb_z=$_rb_ze
}

# _rb_on CAT FD: whether the cat has the loop's FIFO on FD open, as its fd 3 (a cat
# opens a FIFO on its first free fd, and closes it before the next). A cat just started,
# or at the end of its last FIFO, may not be there yet: the loop looks again, up to 200
# times (a few ms; sleeping would start a process, and bash's `read -t` can miss its
# alarm and wait forever).
_rb_on() {
  _rb_w=0
  until [ "/proc/$1/fd/3" -ef "/proc/$$/fd/$2" ]; do
    _rb_w=$((_rb_w + 1))
    [ "$_rb_w" -lt 200 ] || return 1
  done
}

# _rb_ended: after a command's frame ended, where there is no next pair or the cats are
# not known to have this one open (they were just started): closes the loop's end of
# each FIFO that its cat has open; one it does not stays open until the next request
# (runbook reads the frame's end through the cat, so it has it open then).
_rb_ended() {
  _rb_wo=1 _rb_we=1 _rb_sl=1
  [ -n "$_rb_nf" ] || return 0
  if [ -n "$_rb_co" ] && _rb_on "$_rb_co" "$_rb_uf"; then
    _rb_shut "$_rb_uf"
    _rb_wo=
  fi
  if [ -n "$_rb_ce" ] && _rb_on "$_rb_ce" $((_rb_uf + 1)); then
    _rb_shut $((_rb_uf + 1))
    _rb_we=
  fi
  [ -n "$_rb_wo$_rb_we" ] || _rb_sl=
}

# _rb_after: after a command's frame ended (its ends written into the FIFOs), where it
# took the long way or something is out of the ordinary: closes the loop's ends of its
# pair (after the next pair opened), replaces cats whose list ends with it, and says
# whether the next request may take the short path.
_rb_after() {
  if [ -n "$_rb_nf" ] && [ -n "$_rb_ok" ]; then
    _rb_shut "$_rb_uf"
    _rb_shut $((_rb_uf + 1))
    _rb_wo='' _rb_we='' _rb_sl=''
  else
    _rb_ended
  fi
  # A cat whose list ends with this pair gets its successor now, off the next request's
  # way; the cat it replaces is ended then, so this pair is retired.
  if [ -n "$_rb_nf" ] && [ "$_rb_z" -le "$_rb_u" ]; then
    _rb_cats
    _rb_retire "$_rb_uf"
  fi
  _rb_sp=''
  if [ -z "$_rb_sl$_rb_fw" ] && [ -n "$_rb_nf" ] && [ -n "$_rb_cc" ]; then _rb_sp=1; fi
}

# _rb_retire FD: the FIFOs of the pair on FD are not used again (whether their cat read
# them to their end is not known): removed, new ones made when that pair is next opened.
_rb_retire() {
  if [ "$1" = 5 ]; then
    rm -f -- "$_rb_o5" "$_rb_e5"
    _rb_o5='' _rb_e5=''
  else
    rm -f -- "$_rb_o7" "$_rb_e7"
    _rb_o7='' _rb_e7=''
  fi
}

# _rb_settle: at the next request, after the last command, where the cats are not
# both seen on the next pair at once: the loop's ends of its pair still open close
# (runbook read both ends of its frame, so the cats have them open), and each cat must
# go on to the next pair, else something the command left running holds the last one
# open (or the cat is that slow): the cat is ended, and that pair is retired. (With no
# next pair open, the cats are ended first: one that read to the end would open
# whatever the loop has on that fd then.)
_rb_settle() {
  if [ -z "$_rb_nf" ]; then
    # shellcheck disable=SC2086
    _rb_kill $_rb_co $_rb_ce
    _rb_co='' _rb_ce='' _rb_cc=''
  fi
  [ -z "$_rb_wo" ] || _rb_shut "$_rb_uf"
  [ -z "$_rb_we" ] || _rb_shut $((_rb_uf + 1))
  _rb_ok=1
  if [ -z "$_rb_co" ] || ! _rb_on "$_rb_co" "$_rb_nf"; then
    [ -z "$_rb_co" ] || _rb_kill "$_rb_co"
    _rb_co='' _rb_ok='' _rb_cc=''
  fi
  if [ -z "$_rb_ce" ] || ! _rb_on "$_rb_ce" $((_rb_nf + 1)); then
    [ -z "$_rb_ce" ] || _rb_kill "$_rb_ce"
    _rb_ce='' _rb_ok='' _rb_cc=''
  fi
  [ -n "$_rb_ok" ] || _rb_retire "$_rb_uf"
  _rb_uf='' _rb_wo='' _rb_we='' _rb_sl=''
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

# _rb_unfwd: ends the cats listed in _rb_fw: without /proc, the two of the last command
# (they are still there when something it left running holds its FIFOs open); with it,
# cats whose list of FIFOs ended. runbook sends a request only once it read the end of
# the last frame on both streams, so they have copied all of it, and nothing of that
# command reaches the channel after this.
_rb_unfwd() {
  # shellcheck disable=SC2086
  _rb_kill $_rb_fw
  _rb_fw=
}

# _rb_stopped: the command (_rb_p) is stopped, or was: job control hands back a
# stopped job at once (as 128 + the signal) where a shell without job control waits on,
# so the loop waits again while /proc says it is stopped.
_rb_stopped() {
  while :; do
    _rb_s=
    IFS= read -r _rb_s <"/proc/$_rb_p/stat" || return 0
    _rb_s=${_rb_s##*') '}
    case $_rb_s in
      [Tt]*) sleep 1 ;;
      *) ;;
    esac
    wait "$_rb_p"
    _rb_st=$?
    case $_rb_st in
      14[5-9] | 150) ;;
      *) return 0 ;;
    esac
  done
}

# _rb_child ARGV...: in the command's own process (a subshell), reports its pid and
# group, sets the environment and directory, then execs ARGV; without job control it
# execs setsid first, which makes it a session leader in place (a subshell never leads
# a group, so setsid does not fork). _rb_x: job control (1 or not), MODE, /proc (1 or
# not).
_rb_child() {
  # One write for both lines (each write is a packet on its way to runbook): bash's
  # printf writes at every newline of its format, not of a %s argument.
  case $_rb_x in
    *g1)
      IFS= read -r _rb_s </proc/self/stat
      printf '%s' "$_rb_rs$_rb_t begin$_rb_nl$_rb_rs$_rb_t pgid ${_rb_s%% *} $_rb_boot $_rb_s$_rb_nl" >&2
      ;;
    *g) printf '\036%s begin\n' "$_rb_t" >&2 ;;
    *) ;;
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
    !*) _rb_q=${_rb_l#!} ;;
    =*)
      _rb_q=$_rb_q${_rb_l#=}$_rb_nl
      continue
      ;;
    .) ;;
    *)
      printf '\036runbook-session cannot read a request\n'
      exit 1
      ;;
  esac
  eval "set -- $_rb_q"
  # What the command's process does, decided here: after the fork, every variable the
  # child writes costs it a copied page.
  _rb_q='' _rb_t=$1 _rb_i=$3 _rb_d=$4 _rb_x=$_rb_jc$2$_rb_proc
  # The short path: bash with /proc, MODE g, no stdin, cwd or env, and nothing out of
  # the ordinary since the last command (_rb_sp). The cats must have gone on to the
  # next pair (else _rb_settle looks closer, on the long path). The frame of the
  # command's stdout begins on the channel itself (its cat has copied all it will of
  # the last command's); its process reports its group and execs.
  case $_rb_sp$_rb_x$_rb_i$_rb_d:${5-} in
    11g10-:--)
      if [ "/proc/$_rb_co/fd/3" -ef "/proc/$$/fd/$_rb_nf" ] &&
        [ "/proc/$_rb_ce/fd/3" -ef "/proc/$$/fd/$((_rb_nf + 1))" ]; then
        shift 5
        printf '\036%s begin\n' "$_rb_t"
        _rb_uf=$_rb_nf _rb_nf='' _rb_u=$((_rb_u + 1)) _rb_ok=1
        # (Streams to fds named by variables, not files:)
        # shellcheck disable=SC2261
        {
          IFS= read -r _rb_s </proc/self/stat
          printf '%s' "$_rb_rs$_rb_t begin$_rb_nl$_rb_rs$_rb_t pgid ${_rb_s%% *} $_rb_boot $_rb_s$_rb_nl" >&2
          exec "$@"
        } <&4 >&"$_rb_uf" 2>&$((_rb_uf + 1)) 3>&- 4<&- 5>&- 6>&- 7>&- 8>&- &
        wait "$!"
        _rb_st=$?
        case $_rb_st in
          14[5-9] | 150)
            _rb_p=$!
            _rb_stopped
            ;;
          *) ;;
        esac
        printf '\036%s end %s\n' "$_rb_t" "$_rb_st" >&"$_rb_uf"
        printf '\036%s end\n' "$_rb_t" >&$((_rb_uf + 1))
        # The next pair opens, then the loop's ends of this one close (a cat opens the
        # next once it read this one to its end). The long way where this pair's cats
        # are to be replaced, or a FIFO is gone (`<>` would make a plain file).
        case $_rb_uf:$((_rb_z > _rb_u)) in
          5:1)
            if [ -p "$_rb_o7" ] && [ -p "$_rb_e7" ]; then
              # shellcheck disable=SC2094
              exec 7<>"$_rb_o7" 8<>"$_rb_e7" 5>&- 6>&-
              _rb_nf=7
              continue
            fi
            ;;
          7:1)
            if [ -p "$_rb_o5" ] && [ -p "$_rb_e5" ]; then
              # shellcheck disable=SC2094
              exec 5<>"$_rb_o5" 6<>"$_rb_e5" 7>&- 8>&-
              _rb_nf=5
              continue
            fi
            ;;
          *) ;;
        esac
        _rb_open
        _rb_after
        continue
      fi
      ;;
    *) ;;
  esac
  # The long path: every request.
  _rb_sp=''
  shift 4
  [ -z "$_rb_fw" ] || _rb_unfwd
  # The cats must be done with the last command's FIFOs: seen on the next pair at once,
  # or _rb_settle looks closer.
  if [ -n "$_rb_uf" ]; then
    if [ -z "$_rb_sl" ] && [ "/proc/$_rb_co/fd/3" -ef "/proc/$$/fd/$_rb_nf" ] &&
      [ "/proc/$_rb_ce/fd/3" -ef "/proc/$$/fd/$((_rb_nf + 1))" ]; then
      _rb_uf='' _rb_ok=1
    else
      _rb_settle
    fi
  fi
  [ "$_rb_i" != 1 ] || _rb_stdin
  # The command's stdout and stderr (fds _rb_so and _rb_se): FIFOs of its own, each
  # copied to the channel by a cat, in MODE g; the channel's in MODE p (runbook's own
  # kills leave nothing behind). Its stdout's frame begins on the channel itself.
  _rb_pb='' _rb_so=1 _rb_se=3
  case $_rb_x in
    *g1)
      if [ -n "$_rb_nf" ] || _rb_open; then
        if [ -z "$_rb_cc" ] || [ "$_rb_z" -le "$_rb_u" ]; then _rb_cats; fi
        _rb_uf=$_rb_nf _rb_so=$_rb_nf _rb_se=$((_rb_nf + 1)) _rb_nf='' _rb_u=$((_rb_u + 1))
      else
        _rb_pb=1
      fi
      ;;
    *g)
      # Without /proc: two cats for this command alone, ended at the next request. The
      # loop opens the FIFOs read-write, so that no open waits for the other end and a
      # cat sees their end only once the loop closes them too, and opens the cats' read
      # ends itself (7, 8), so that the pipes are there whenever a cat gets to read
      # them. Both ends of each FIFO are opened here on purpose:
      # shellcheck disable=SC2094
      if _rb_pipes && [ -p "$_rb_o" ] && [ -p "$_rb_e" ] &&
        exec 5<>"$_rb_o" 6<>"$_rb_e" 7<"$_rb_o" 8<"$_rb_e"; then
        cat <&7 3>&- 4<&- 5>&- 6>&- 7<&- 8<&- &
        _rb_fw=$!
        cat <&8 >&3 3>&- 4<&- 5>&- 6>&- 7<&- 8<&- &
        _rb_fw="$_rb_fw $!"
        exec 7<&- 8<&-
        _rb_so=5 _rb_se=6
      else
        _rb_pb=1
      fi
      ;;
    *) printf '\036%s begin\n' "$_rb_t" >&3 ;;
  esac
  printf '\036%s begin\n' "$_rb_t"
  # The command's process: without job control a foreground subshell, not `&`: a
  # background job of a shell without job control would ignore SIGINT and SIGQUIT.
  # With it, a background job and `wait` for its pid: job control hands back a stopped
  # foreground job at once and may drop its status before it ends.
  # shellcheck disable=SC2261
  if [ -n "$_rb_jc" ]; then
    _rb_child "$@" <&4 >&"$_rb_so" 2>&"$_rb_se" 3>&- 4<&- 5>&- 6>&- 7>&- 8>&- &
    _rb_p=$!
    wait "$_rb_p"
    _rb_st=$?
    case $_rb_st in
      14[5-9] | 150) _rb_stopped ;;
      *) ;;
    esac
  else
    (_rb_child "$@") <&4 >&"$_rb_so" 2>&"$_rb_se" 3>&- 4<&- 5>&- 6>&- 7>&- 8>&-
    _rb_st=$?
  fi
  [ "$_rb_i" != 1 ] || exec 4</dev/null
  # With /proc, the next pair opens first (a cat opens it once it read this one to its
  # end).
  case $_rb_x$_rb_pb in
    *g1) [ -n "$_rb_nf" ] || _rb_open ;;
    *) ;;
  esac
  printf '\036%s end %s\n' "$_rb_t" "$_rb_st" >&"$_rb_so"
  printf '\036%s end\n' "$_rb_t" >&"$_rb_se"
  case $_rb_x$_rb_pb in
    *g1) _rb_after ;;
    *g) exec 5>&- 6>&- ;;
    *) ;;
  esac
done
