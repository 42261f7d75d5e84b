# script: store-probe.sh
# for: artifact.capture
# made of: store_probe.sh store_lib.sh
# args: dir
# store_probe.sh DIR: whether artifacts can be kept in DIR on this machine (a team's
# store that runbook reaches over ssh; see store/remote.rs), asked by artifact.capture
# before it packs anything, so that a store it cannot write stops the capture before any
# change: DIR is a directory this user can write (and so are its objects and manifests
# directories, where there), or it is not there yet and the nearest directory above it
# can be written (the first capture makes it). Prints `ok`. POSIX sh.
# shellcheck disable=SC2154 # dir is set in store_lib.sh

main() {
  store_dir "$1"
  up=$dir
  while [ ! -e "$up" ] && [ ! -L "$up" ]; do
    up=${up%/*}
    [ -n "$up" ] || up=/
  done
  [ -d "$up" ] || fail "$up is not a directory"
  for d in "$up" "$dir/objects" "$dir/manifests"; do
    [ "$d" = "$up" ] || [ -e "$d" ] || [ -L "$d" ] || continue
    [ "$d" = "$up" ] || [ ! -L "$d" ] || fail "$d is a symbolic link, where the store keeps its own files"
    if [ ! -d "$d" ] || [ ! -w "$d" ] || [ ! -x "$d" ]; then
      fail "$d cannot be written here (as $(id -un 2>/dev/null || echo this user))"
    fi
  done
  echo ok
}
