# script: store-put.sh
# for: artifact.capture
# made of: store_put.sh store_lib.sh
# args: dir verb args...
# store_put.sh DIR VERB ARG…: writes into the artifact store DIR (a team's store that
# runbook reaches over ssh; see store/remote.rs), for artifact.capture. Nothing gets a
# name a reader looks at until it is whole:
#   start KIND           makes a new file DIR/KIND/.upload.XXXXXXXXXX (KIND: objects or
#                        manifests; mktemp: an unpredictable name, 0600), writes stdin
#                        (the first piece) to it and prints its name;
#   append FILE          adds stdin (the next piece) to FILE;
#   object FILE SHA256   checks that FILE's sha256 is SHA256 (what runbook sent), then
#                        links it as DIR/objects/SHA256.tar.gz, which never replaces an
#                        object (the same bytes are kept once; its time is renewed so a
#                        prune running now keeps it), and removes FILE;
#   manifest FILE ID     renames FILE to DIR/manifests/ID.json (an artifact, listed from
#                        now on);
#   abort FILE           removes FILE (the capture failed).
# A write that fails part way (a full disk) removes its file. POSIX sh, mktemp, ln, and
# sha256sum (GNU's or busybox's) or shasum.
# shellcheck disable=SC2154 # dir and up_name are set in store_lib.sh

main() {
  store_dir "$1"
  verb=$2
  shift 2
  case $verb in
    start)
      case $1 in
        objects | manifests) ;;
        *) fail "start: $1 is not objects or manifests" ;;
      esac
      mkdir -p -- "$dir/$1" || fail "cannot make $dir/$1"
      # Someone who can write the store's directory could have put a link there, to
      # have the store's files written elsewhere.
      [ ! -L "$dir/$1" ] || fail "$dir/$1 is a symbolic link; nothing was stored"
      file=$(mktemp "$dir/$1/.upload.XXXXXXXXXX") || fail "cannot make a file in $dir/$1"
      if ! cat >>"$file"; then
        rm -f -- "$file"
        fail "writing $file failed (a full disk?); nothing was stored"
      fi
      printf '%s\n' "$file"
      ;;
    append)
      upload "$1"
      if ! cat >>"$1"; then
        rm -f -- "$1"
        fail "writing $1 failed (a full disk?); nothing was stored"
      fi
      ;;
    object)
      upload "$1"
      case $1 in
        "$dir/objects/$up_name") ;;
        *) fail "$1 is not an object upload" ;;
      esac
      hex 64 "$2" || fail "$2 is not a sha256"
      if sum=$(sha256sum <"$1" 2>/dev/null); then
        :
      elif sum=$(shasum -a 256 <"$1" 2>/dev/null); then
        :
      else
        rm -f -- "$1"
        printf 'needs sha256sum (to check that an archive reached the store whole)\n' >&2
        exit 127
      fi
      sum=${sum%%[!0-9a-f]*}
      if [ "$sum" != "$2" ]; then
        rm -f -- "$1"
        fail "the archive reached $dir with sha256 $sum, not $2 as sent; nothing was stored"
      fi
      shared "$1" || fail "cannot set the mode of $1"
      obj=$dir/objects/$2.tar.gz
      if ln -- "$1" "$obj" 2>/dev/null; then
        echo new
      elif [ -f "$obj" ] && [ ! -L "$obj" ]; then
        touch -c -- "$obj"
        echo kept
      else
        rm -f -- "$1"
        fail "cannot link $obj (a file system without hard links?); nothing was stored"
      fi
      rm -f -- "$1"
      ;;
    manifest)
      upload "$1"
      case $1 in
        "$dir/manifests/$up_name") ;;
        *) fail "$1 is not a manifest upload" ;;
      esac
      hex 16 "$2" || fail "$2 is not an artifact id"
      shared "$1" || fail "cannot set the mode of $1"
      mv -f -- "$1" "$dir/manifests/$2.json" || fail "cannot rename $1"
      ;;
    abort)
      upload "$1"
      rm -f -- "$1"
      ;;
    *) fail "unknown verb $verb" ;;
  esac
}
