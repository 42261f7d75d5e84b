# script: file-read.sh
# for: file.get, file.put, file.template
# made of: file_read.sh file_lib.sh
# file_read.sh PATH MAX: what is at PATH, for file.get and for the diff and the
# idempotence check of file.put. Prints `key=value` lines: `type=` file, missing, link,
# dir or other; for a file also `stat=` (file_lib.sh's `info`) and `sha256=`; then a line
# `--`, then, for a file of at most MAX bytes, its bytes as they are. A link is never
# followed: file.put replaces no link and file.get reads none.

main() {
  if [ -L "$1" ]; then
    printf 'type=link\n--\n'
  elif [ ! -e "$1" ]; then
    printf 'type=missing\n--\n'
  elif [ -d "$1" ]; then
    printf 'type=dir\n--\n'
  elif [ ! -f "$1" ]; then
    printf 'type=other\n--\n'
  else
    [ -r "$1" ] || fail "cannot read $1 (permission denied)"
    st=$(info "$1") || exit 1
    sha=$(sum "$1") || exit $?
    size=${st#* * * }
    size=${size%% *}
    printf 'type=file\nstat=%s\nsha256=%s\n--\n' "$st" "$sha"
    # The bytes are read again here: file.rs checks them against the sha256 above, so a
    # file that changed in between is told, never half read.
    if [ "$size" -le "$2" ]; then
      cat -- "$1" || fail "cannot read $1"
    fi
  fi
}
