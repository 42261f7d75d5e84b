# script: artifact-unpack.sh
# for: artifact.restore
# made of: unpack.sh lib.sh
# args: root path
# unpack.sh ROOT PATH: puts the gzipped tar on stdin at PATH, which lies strictly inside
# the cache root ROOT, for artifact.restore, and prints where the directory that was at
# PATH was kept (nothing when there was none). PATH is reached from ROOT with `descend`
# (lib.sh, which follows this and runs main). The archive was checked before it was sent
# (artifact.rs: its sha256 and every entry); it is extracted again with care: into a new
# private staging directory beside PATH (so on the same filesystem), without owners or
# setuid/setgid modes, then checked for what the archive may not hold (devices, fifos,
# sockets, hard links, setuid/setgid files) before anything else changes. A failure up
# to there (a full disk) removes the staging directory and leaves PATH as it was. Then
# what was at PATH is renamed to PATH.runbook-kept-<UTC time> (cache.clear's keep: so
# `cache.restore` puts it back) and the staging directory renamed to PATH.
# shellcheck disable=SC2154 # here and name are set in lib.sh

main() {
  descend "$1" "$2"
  if [ -L "./$name" ]; then
    fail "$here/$name is a symlink now (replaced since it was checked); nothing was restored"
  fi
  stage=$(umask 077 && mktemp -d "./.$name.runbook-staging.XXXXXXXXXX") ||
    fail "cannot make a staging directory in $here; nothing was restored"
  stage=${stage#./}
  # The working directory stays $here: ./$stage is the staging directory until the end.
  trap 'rm -rf -- "./$stage"' EXIT
  (cd -P -- "./$stage" && umask 022 && tar -xzof - --no-same-permissions) ||
    fail "extracting into $here/$stage failed (a full disk?); $here/$name was left as it was"
  bad=$(find "./$stage" \( -perm -4000 -o -perm -2000 -o -type b -o -type c -o -type p -o -type s \
    -o \( -type f -links +1 \) \) -print 2>/dev/null | head -n 3)
  [ -z "$bad" ] || fail "the archive held a device, fifo, socket, hard link or setuid/setgid file (${bad%%"$nl"*}); $here/$name was left as it was"
  kept=
  if [ -e "./$name" ]; then
    ts=$(date -u +%Y%m%dT%H%M%SZ)
    to=$name.runbook-kept-$ts
    n=0
    while [ -e "./$to" ] || [ -L "./$to" ]; do
      n=$((n + 1))
      to=$name.runbook-kept-$ts.$n
    done
    mv -T -- "./$name" "./$to" || fail "cannot move $here/$name aside; it was left as it was"
    kept=$here/$to
  fi
  if ! mv -T -- "./$stage" "./$name"; then
    [ -z "$kept" ] || mv -T -- "./$to" "./$name"
    fail "cannot rename the staging directory to $here/$name; the old one was put back"
  fi
  trap - EXIT
  printf '%s\n' "$kept"
}
