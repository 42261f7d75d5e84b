# script: store-read.sh
# for: artifact.restore, runbook artifacts verify
# made of: store_read.sh store_lib.sh
# args: dir sha256 skip_mib count_mib
# store_read.sh DIR SHA256 SKIP COUNT: writes COUNT MiB of the object SHA256 of the
# artifact store DIR, from SKIP MiB on, to stdout, for artifact.restore and `runbook
# artifacts verify` (store/remote.rs), which read an object in pieces (a command's
# output is bounded) and check its sha256 before anything is extracted. POSIX sh, dd.
# shellcheck disable=SC2154 # dir is set in store_lib.sh

main() {
  store_dir "$1"
  hex 64 "$2" || fail "$2 is not the name of an object (a sha256)"
  case $3:$4 in
    *[!0-9:]* | :* | *:) fail "SKIP and COUNT are MiB counts, not $3 and $4" ;;
  esac
  obj=$dir/objects/$2.tar.gz
  if [ ! -f "$obj" ] || [ -L "$obj" ]; then
    fail "no object $2 in the store $dir (deleted there?)"
  fi
  dd if="$obj" bs=1048576 skip="$3" count="$4" 2>/dev/null || fail "cannot read $obj"
}
