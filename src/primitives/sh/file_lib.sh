# file_lib.sh: what the scripts of file.get and file.put share (file_read.sh,
# file_put.sh). file.rs puts it after each script, which defines main; main runs at the
# end with the script's arguments.

fail() { # the reason on stderr, and stop: nothing after it runs
  printf 'runbook file: %s\n' "$*" >&2
  exit 1
}

# Prints the sha256 of the file $1 (64 hex digits), with GNU's or busybox's sha256sum,
# or shasum. Without any of them: the `needs` line file.rs words for the target.
sum() {
  if command -v sha256sum >/dev/null 2>&1; then
    s=$(sha256sum <"$1") || fail "cannot read $1"
  elif command -v shasum >/dev/null 2>&1; then
    s=$(shasum -a 256 <"$1") || fail "cannot read $1"
  else
    printf 'needs sha256sum (to tell whether a file holds what file.put writes)\n' >&2
    exit 127
  fi
  printf '%s\n' "${s%%[!0-9a-f]*}"
}

# `MODE UID GID SIZE USER GROUP` of the file $1 (its mode in octal, as chmod takes it),
# from stat (GNU's or busybox's), without following a link.
info() {
  stat -c '%a %u %g %s %U %G' -- "$1" 2>/dev/null || fail "cannot stat $1 (no stat?)"
}

main "$@"
