# script: store-list.sh
# for: artifact.restore, artifact.list, runbook artifacts
# made of: store_list.sh store_lib.sh
# args: dir
# store_list.sh DIR: prints every manifest of the artifact store DIR (runbook reaches a
# team's store on another machine over ssh; see store/remote.rs), each as the byte 036
# (RS: JSON text never holds it raw), its file name, a newline and its text. A manifest
# is written under a dot name and renamed whole, so one being written is not listed
# until it is complete; one deleted (pruned) while this runs is left out. No store yet
# (no manifests directory): an empty store, nothing printed. POSIX sh.
# shellcheck disable=SC2154 # dir is set in store_lib.sh

main() {
  store_dir "$1"
  if [ ! -d "$dir/manifests" ]; then
    [ ! -e "$dir" ] || [ -d "$dir" ] || fail "$dir is not a directory"
    exit 0
  fi
  for f in "$dir"/manifests/*.json; do
    # No manifest at all: the pattern itself.
    [ -e "$f" ] || continue
    if ! body=$(cat -- "$f" 2>/dev/null); then
      # Pruned since the pattern was expanded: not in the store any more.
      [ -e "$f" ] || continue
      fail "cannot read $f"
    fi
    printf '\036%s\n%s\n' "${f##*/}" "$body"
  done
}
