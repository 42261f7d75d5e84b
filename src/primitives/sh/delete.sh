# script: cache-delete.sh
# for: cache.clear
# made of: delete.sh lib.sh
# args: root path
# delete.sh ROOT PATH: deletes PATH, which lies strictly inside the cache root ROOT, in
# the same command that checks it, so nothing can be swapped between check and delete:
# PATH is reached from ROOT with `descend` (lib.sh, which follows this and runs main),
# refused when a filesystem is mounted at or under it, and deleted by its own name in the
# directory that holds it, never crossing into another filesystem.
# shellcheck disable=SC2154 # here, name and nl are set in lib.sh

main() {
  descend "$1" "$2"
  target=$here/$name
  if [ -L "./$name" ]; then
    fail "$target is a symlink now (replaced since it was checked); nothing was deleted"
  fi
  if [ ! -e "./$name" ]; then exit 0; fi # gone already: nothing to delete
  if [ ! -d "./$name" ]; then exec rm -f -- "./$name"; fi
  # The probe looked for mounts too; this is the look the delete relies on, made once the
  # path is reached.
  m=$(mounts_under "$target") || fail "cannot read the mounts under $target; nothing was deleted"
  [ -z "$m" ] || fail "a filesystem is mounted at ${m%%"$nl"*}; unmount it first (nothing was deleted)"
  dev=$(device .) || exit 1
  tdev=$(device "./$name") || exit 1
  [ "$tdev" = "$dev" ] || fail "$target is a mount point; nothing was deleted"
  # GNU rm walks the tree through directory file descriptors, never following a symlink
  # and checking that each directory it enters is the one it listed; --one-file-system
  # keeps it out of other filesystems. `rm -f` with no operand tells it apart: busybox rm
  # rejects the option.
  if rm -f --one-file-system 2>/dev/null; then
    exec rm -rf --one-file-system -- "./$name"
  fi
  walk
}

# Deletes ./$name the slow, safe way, where rm is not GNU rm. Busybox rm -r and find
# -delete walk by path names, which a directory swapped for a symlink inside the tree
# redirects mid-walk. So one directory at a time: `enter` it (cd -P, checked with pwd -P),
# delete only names in the working directory (rm -f ./NAME and rmdir ./NAME never follow
# a symlink), go back `up` (checked too), and stop at a directory on another filesystem.
walk() {
  top=$here
  enter "$name"
  same_fs
  while :; do
    set --
    sub=
    for e in ./* ./.[!.]* ./..?*; do
      if [ -d "$e" ] && [ ! -L "$e" ]; then
        [ -n "$sub" ] || sub=${e#./}
      elif [ -e "$e" ] || [ -L "$e" ]; then
        set -- "$@" "$e"
        if [ "$#" -ge 500 ]; then
          rm -f -- "$@" || fail "could not delete everything in $here"
          set --
        fi
      fi
    done
    if [ "$#" -gt 0 ]; then rm -f -- "$@" || fail "could not delete everything in $here"; fi
    if [ -n "$sub" ]; then
      enter "$sub"
      same_fs
      continue
    fi
    # Nothing left here (what appears meanwhile makes the rmdir fail): remove it.
    emptied=${here##*/}
    up
    rmdir -- "./$emptied" || fail "could not remove $here/$emptied"
    [ "$here" != "$top" ] || break
  done
}

same_fs() { # whether the working directory is on the filesystem the walk started on
  d=$(device .) || exit 1
  [ "$d" = "$dev" ] || fail "$here is on another filesystem (a mount?); it was not deleted"
}
