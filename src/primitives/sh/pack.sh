# script: artifact-pack.sh
# for: artifact.capture
# made of: pack.sh lib.sh
# args: root path
# pack.sh ROOT PATH: packs the directory PATH, which lies strictly inside the cache root
# ROOT, as a gzipped tar of its contents (`./…` names) into a new file beside it, for
# artifact.capture, and prints `SIZE FILE`; artifact.rs then reads FILE in pieces
# (chunk.sh, which deletes it after the last), as a command's output is bounded. FILE is
# made by mktemp (an unpredictable name, 0600) in the directory that holds PATH, so it
# is never inside what is packed. PATH is reached from ROOT with `descend` (lib.sh,
# which follows this and runs main) and entered with `enter`, so a parent swapped for a
# symlink since the probe stops the capture instead of packing something else. POSIX sh,
# tar and gzip (busybox's too).
# shellcheck disable=SC2154 # here and name are set in lib.sh

main() {
  descend "$1" "$2"
  parent=$here
  file=$(umask 077 && mktemp "./.$name.runbook-pack.XXXXXXXXXX") ||
    fail "cannot make a file for the archive in $parent; nothing was captured"
  file=$parent/${file#./}
  trap 'rm -f -- "$file"' EXIT
  enter "$name"
  # A hard link would be stored as one, which artifact.restore refuses (a link can point
  # anywhere in the archive): refused here, when it can still be fixed.
  linked=$(find . -type f -links +1 -print 2>/dev/null | head -n 3)
  [ -z "$linked" ] || fail "$here holds hard links (${linked%%"$nl"*}, …), which an artifact does not keep; nothing was captured"
  tar -czf - . >"$file" || fail "packing $here failed (a full disk?); nothing was captured"
  size=$(wc -c <"$file") || fail "cannot measure $file"
  trap - EXIT
  printf '%s %s\n' "$((size + 0))" "$file"
}
