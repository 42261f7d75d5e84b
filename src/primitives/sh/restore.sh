# script: cache-restore.sh
# for: cache.restore
# made of: restore.sh lib.sh
# args: root path kept
# restore.sh ROOT PATH KEPT: puts the kept copy KEPT (PATH.runbook-kept-…, beside PATH)
# back at PATH, which lies strictly inside the cache root ROOT. Both are reached from ROOT
# with `descend` (lib.sh, which follows this and runs main) in this same command and
# renamed by their own names in the directory that holds them. An empty directory at PATH
# is removed first (rmdir: only while it is empty); anything else there stops the restore
# (cache.rs deletes it first, with delete.sh, when forced).
# shellcheck disable=SC2154 # here and name are set in lib.sh

main() {
  descend "$1" "$2"
  kept=$(expand "$3")
  case ${kept##*/} in
    "$name".runbook-kept-?*) ;;
    *) fail "$kept is not a kept copy of $here/$name" ;;
  esac
  [ "${kept%/*}" = "$here" ] || fail "$kept is not beside $here/$name"
  kept=${kept##*/}
  if [ -L "./$kept" ] || [ ! -e "./$kept" ]; then
    fail "the kept copy $here/$kept is gone or a symlink now; nothing was restored"
  fi
  if [ -d "./$name" ] && [ ! -L "./$name" ]; then
    rmdir -- "./$name" 2>/dev/null || fail "$here/$name is not empty any more; nothing was restored"
  elif [ -e "./$name" ] || [ -L "./$name" ]; then
    fail "$here/$name is in the way (made since it was checked); nothing was restored"
  fi
  mv -T -- "./$kept" "./$name"
}
