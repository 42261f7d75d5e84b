# script: disk-free.sh
# for: disk.free
# made of: disk_free.sh lib.sh
# args: path
# disk_free.sh PATH: the room on the filesystem that holds PATH, for disk.rs to read:
# the directory measured on the first line (PATH, or its nearest existing parent when
# PATH does not exist yet: where a new venv or cache would be made), then `df -P -k`'s
# output for it (POSIX: 1024-byte blocks, one line per filesystem, never wrapped).
# `~` and `~/` mean the target user's home (lib.sh, which follows this, runs main).

main() {
  p=$(expand "$1")
  while [ ! -e "$p" ]; do
    parent=${p%/*}
    [ -n "$parent" ] || parent=/
    [ "$parent" != "$p" ] || break
    p=$parent
  done
  command -v df >/dev/null 2>&1 || {
    printf 'needs df (to measure free disk space)\n' >&2
    exit 127
  }
  printf '%s\n' "$p"
  df -P -k -- "$p"
}
