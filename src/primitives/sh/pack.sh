# pack.sh ROOT PATH: writes the directory PATH, which lies strictly inside the cache root
# ROOT, to stdout as a gzipped tar of its contents (`./…` names), for artifact.capture.
# PATH is reached from ROOT with `descend` (lib.sh, which follows this and runs main) and
# entered with `enter`, so a parent swapped for a symlink since the probe stops the
# capture instead of packing something else. POSIX sh, tar and gzip (busybox's too).
# shellcheck disable=SC2154 # here and name are set in lib.sh

main() {
  descend "$1" "$2"
  enter "$name"
  # A hard link would be stored as one, which artifact.restore refuses (a link can point
  # anywhere in the archive): refused here, when it can still be fixed.
  linked=$(find . -type f -links +1 -print 2>/dev/null | head -n 3)
  [ -z "$linked" ] || fail "$here holds hard links (${linked%%"$nl"*}, …), which an artifact does not keep; nothing was captured"
  tar -czf - . || fail "packing $here failed; nothing was captured"
}
