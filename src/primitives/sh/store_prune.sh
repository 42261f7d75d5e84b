# script: store-prune.sh
# for: runbook artifacts prune
# made of: store_prune.sh store_lib.sh
# args: dir files...
# store_prune.sh DIR KIND/NAME…: deletes files of the artifact store DIR (a team's store
# reached over ssh; see store/remote.rs) for `runbook artifacts prune`, and prints each
# one deleted. Only names of the store itself: manifests/ID.json (ID: 16 hex digits),
# objects/SHA256.tar.gz and KIND/.upload.XXXXXXXXXX; the last two only while still older
# than an hour (checked again now: a capture may have renewed one since it was listed).
# Nothing outside DIR is ever named. POSIX sh, find.
# shellcheck disable=SC2154 # dir is set in store_lib.sh

main() {
  store_dir "$1"
  shift
  for rel in "$@"; do
    kind=${rel%%/*}
    name=${rel#*/}
    case $kind in
      objects | manifests) ;;
      *) fail "$rel is not a file of the store" ;;
    esac
    case $name in
      */* | '') fail "$rel is not a file of the store" ;;
    esac
    case $kind/$name in
      manifests/*.json)
        hex 16 "${name%.json}" || fail "$rel is not a manifest"
        ;;
      objects/*.tar.gz | */.upload.??????????)
        case $name in
          *.tar.gz) hex 64 "${name%.tar.gz}" || fail "$rel is not an object" ;;
        esac
        [ -n "$(find "$dir/$rel" -prune -type f -mmin +60 2>/dev/null)" ] || continue
        ;;
      *) fail "$rel is not a file of the store" ;;
    esac
    [ -e "$dir/$rel" ] || continue
    rm -f -- "$dir/$rel" || fail "cannot delete $dir/$rel"
    printf '%s\n' "$rel"
  done
}
