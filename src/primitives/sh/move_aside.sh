# script: cache-move-aside.sh
# for: cache.clear { keep = true }
# made of: move_aside.sh lib.sh
# args: root path
# move_aside.sh ROOT PATH: renames PATH, which lies strictly inside the cache root ROOT,
# to PATH.runbook-kept-<UTC time> beside it (a name that sorts by time; .N is added when
# one was kept in the same second) and prints the new path. PATH is reached from ROOT
# with `descend` (lib.sh, which follows this and runs main) in this same command and
# renamed by its own name in the directory that holds it, so a swapped parent cannot make
# it move anything outside the root. The name is made here, on the target, so a dry-run
# plans the very command a real run performs.
# shellcheck disable=SC2154 # here and name are set in lib.sh

main() {
  descend "$1" "$2"
  if [ -L "./$name" ]; then
    fail "$here/$name is a symlink now (replaced since it was checked); nothing was moved"
  fi
  [ -e "./$name" ] || fail "$here/$name is gone (since it was checked); nothing was moved"
  ts=$(date -u +%Y%m%dT%H%M%SZ)
  to=$name.runbook-kept-$ts
  n=0
  while [ -e "./$to" ] || [ -L "./$to" ]; do
    n=$((n + 1))
    to=$name.runbook-kept-$ts.$n
  done
  mv -T -- "./$name" "./$to" || exit 1
  printf '%s\n' "$here/$to"
}
