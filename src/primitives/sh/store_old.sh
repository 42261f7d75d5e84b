# script: store-old.sh
# for: runbook artifacts prune
# made of: store_old.sh store_lib.sh
# args: dir
# store_old.sh DIR: prints the files of the artifact store DIR (a team's store reached
# over ssh; see store/remote.rs) that `runbook artifacts prune` may delete once no
# manifest names them, each as KIND/NAME: objects, and uploads a capture that died left
# behind, older than an hour (a capture between its objects and its manifest is never
# that slow, and renews an object it finds there). POSIX sh, find.
# shellcheck disable=SC2154 # dir is set in store_lib.sh

main() {
  store_dir "$1"
  for kind in objects manifests; do
    [ -d "$dir/$kind" ] || continue
    find "$dir/$kind" -maxdepth 1 -type f -mmin +60 -print | while IFS= read -r f; do
      name=${f##*/}
      case $kind/$name in
        objects/*.tar.gz | */.upload.??????????) printf '%s/%s\n' "$kind" "$name" ;;
      esac
    done
  done
}
