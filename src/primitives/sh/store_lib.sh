# store_lib.sh: what the scripts of a store on another machine share (store_list.sh,
# store_read.sh, store_put.sh, store_old.sh, store_prune.sh; see store/remote.rs).
# remote.rs puts it after each script, which defines main; main runs at the end, its $1
# the store's directory, checked here first as $dir.

fail() { # the reason on stderr, and stop: nothing after it runs
  printf 'runbook store: %s\n' "$*" >&2
  exit 1
}

# $1: the store's directory. Absolute and tidy (remote.rs sends it so; checked again
# here, since a `..` would put files outside the store).
store_dir() {
  case $1 in
    /?*) ;;
    *) fail "$1 is not an absolute path" ;;
  esac
  case $1/ in
    *//* | */./* | */../*) fail "$1 is not a tidy path (no '.', '..' or '//')" ;;
  esac
  dir=$1
}

hex() { # whether $2 is $1 lowercase hex digits (an object's sha256, a manifest's id)
  case $2 in
    '' | *[!0-9a-f]*) return 1 ;;
  esac
  [ "${#2}" -eq "$1" ]
}

# $1 must be a file store_put.sh start made: DIR/objects/.upload.XXXXXXXXXX or the
# same in manifests, a plain file, named by the store, not by whoever asks.
upload() {
  up_name=${1##*/}
  case $1 in
    "$dir/objects/$up_name" | "$dir/manifests/$up_name") ;;
    *) fail "$1 is not a file in the store $dir" ;;
  esac
  case $up_name in
    .upload.??????????) ;;
    *) fail "$1 is not an upload in progress" ;;
  esac
  if [ ! -f "$1" ] || [ -L "$1" ]; then
    fail "$1 is gone or not a plain file"
  fi
}

# Makes $1 (whole now) readable as the umask of the user the store is reached as lets a
# new file be: a team's store is read by the team. Until then it was mktemp's 0600.
shared() {
  sh_umask=$(umask) || return 1
  chmod "$(printf '%o' $((0666 & ~0$sh_umask)))" "$1"
}

main "$@"
