# script: artifact-chunk.sh
# for: artifact.capture
# args: file skip_mib count_mib last
# chunk.sh FILE SKIP COUNT LAST: writes COUNT MiB of FILE, from SKIP MiB on, to stdout,
# for artifact.capture (FILE is what pack.sh made: `.NAME.runbook-pack.XXXXXXXXXX`), and
# deletes FILE after the last piece (LAST = 1): it is runbook's own scratch, and the
# archive is in the store by then. POSIX sh and dd (busybox's too).

case ${1##*/} in
  .*.runbook-pack.??????????) ;;
  *)
    printf 'runbook artifact: %s is not an archive pack.sh made\n' "$1" >&2
    exit 1
    ;;
esac
if [ ! -f "$1" ] || [ -L "$1" ]; then
  printf 'runbook artifact: %s is gone or not a plain file\n' "$1" >&2
  exit 1
fi
dd if="$1" bs=1048576 skip="$2" count="$3" 2>/dev/null || exit 1
[ "$4" != 1 ] || rm -f -- "$1"
