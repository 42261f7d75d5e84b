# lib.sh: what the cache scripts (and disk_free.sh) share. cache.rs puts it after each
# script (probe.sh, delete.sh, move_aside.sh, restore.sh), which defines main, so the
# command starts with what the script does; main runs at the end. A path under a cache
# root is reached from the root one name at a time, never through a symlink, and acted on
# by its own name in the directory that holds it.

# shellcheck disable=SC2034 # a newline, for the scripts that follow lib.sh
nl='
'
fail() { # the reason on stderr, and stop: nothing after it runs
  printf 'runbook cache: %s\n' "$*" >&2
  exit 1
}

expand() { # ~ and ~/... as the home of the user commands run as (cache.rs sends both)
  # shellcheck disable=SC2088 # a literal ~ is what is looked for
  case $1 in
    '~') printf '%s\n' "$HOME" ;;
    '~/'*) printf '%s/%s\n' "$HOME" "${1#'~/'}" ;;
    *) printf '%s\n' "$1" ;;
  esac
}

# Enters ./$1 (a name in the working directory, whose path is $here) and checks that the
# working directory is now "$here/$1" as `pwd -P` (getcwd, from the kernel) sees it. A name
# swapped for a symlink, before or while we enter it, leads elsewhere, so the check fails
# and we stop; once it passes, "./NAME" means a name in that very directory whatever is
# renamed later, so nothing after it can be redirected.
enter() {
  if [ ! -d "./$1" ] || [ -L "./$1" ]; then
    fail "$here/$1 is not a directory any more (replaced since it was checked?)"
  fi
  cd -P -- "./$1" 2>/dev/null || fail "cannot enter $here/$1"
  physical
  [ "$now" = "$here/$1" ] || fail "$here/$1 led to $now (swapped for a symlink?)"
  here=$now
}

# Sets `now` to the working directory as `pwd -P` says, a name ending in a newline kept
# whole (a command substitution alone would drop it, and the check would fail on it).
physical() {
  now=$(pwd -P && echo .) || fail "cannot tell where the working directory is"
  now=${now%.}
  now=${now%"$nl"}
}

# Back up to the parent of the working directory, checked the same way: a directory moved
# while we worked in it has another parent now, and we stop rather than follow it there.
up() {
  cd -P .. 2>/dev/null || fail "cannot go back up from $here"
  physical
  [ "$now" = "${here%/*}" ] || fail "$here was moved while we worked in it (its parent is now $now)"
  here=$now
}

# Enters the directory that holds $2, which must lie strictly inside the cache root $1
# (both as cache.rs resolved them: no symlink, no . or .. part): the root first, checked
# with `pwd -P`, then each name below it with `enter`. Then `here` is the path of that
# directory and `name` the last name of $2; act on "./$name" only.
descend() {
  root=$(expand "$1")
  path=$(expand "$2")
  case $root in
    /) fail "/ is never a cache root" ;;
    /*) ;;
    *) fail "the cache root $root is not an absolute path" ;;
  esac
  case $path in
    "$root"/?*) ;;
    *) fail "$path is not inside the cache root $root" ;;
  esac
  cd -P -- "$root" 2>/dev/null || fail "cannot enter the cache root $root"
  physical
  here=$now
  [ "$here" = "$root" ] || fail "the cache root $root led to $here (swapped for a symlink?)"
  rest=${path#"$root"/}
  while :; do
    case $rest in
      */*) part=${rest%%/*} ;;
      *) break ;;
    esac
    rest=${rest#*/}
    case $part in '' | . | ..) fail "$path has an empty, . or .. part" ;; esac
    enter "$part"
  done
  case $rest in '' | . | ..) fail "$path has an empty, . or .. part" ;; esac
  # shellcheck disable=SC2034 # for the script that follows lib.sh
  name=$rest
}

# Prints the mount points at or under the directory $1, one a line, as /proc/self/mounts
# writes them: there a space is \040, a tab \011, a newline \012 and a backslash \134, so
# each is decoded before it is compared (a path with a space would never match as text),
# and printed as written (one line each). Prints nothing where there is no /proc.
mounts_under() {
  [ -e /proc/self/mounts ] || return 0
  D=$1 awk '
    function decode(s,   out, n) {
      out = ""
      while (match(s, /\\[0-3][0-7][0-7]/)) {
        n = substr(s, RSTART + 1, 1) * 64 + substr(s, RSTART + 2, 1) * 8 + substr(s, RSTART + 3, 1)
        out = out substr(s, 1, RSTART - 1) sprintf("%c", n)
        s = substr(s, RSTART + 4)
      }
      return out s
    }
    BEGIN { d = ENVIRON["D"] }
    { m = decode($2); if (m == d || index(m, d "/") == 1) print $2 }' /proc/self/mounts
}

# The device number of $1 itself (a symlink is not followed), from stat (GNU or busybox).
device() {
  stat -c %d -- "$1" 2>/dev/null || fail "cannot tell which filesystem $here/$1 is on (no stat?)"
}

# lxc-attach --clear-env (PVE 9's `pct exec`) gives no HOME: `~` is then the user's home
# from the passwd file, as a login would set it (else `~/.cache` read as `/.cache`).
[ -n "${HOME:-}" ] || HOME=$(awk -F: -v u="$(id -u)" '$3 == u { print $6; exit }' /etc/passwd 2>/dev/null)
main "$@"
