# script: file-put.sh
# for: file.put, file.template
# made of: file_put.sh file_lib.sh
# file_put.sh PATH WORD…: makes the file PATH hold the bytes whose sha256 is `new=SHA`,
# atomically: a new file with an unpredictable name (mktemp, 0600) in PATH's own
# directory gets them, then its owner and mode, and is renamed over PATH, so PATH is
# whole or as it was. The words:
#   old=SHA|old=none  what PATH held when it was read (none: nothing was there); if it
#                     holds something else now, nothing is written;
#   new=SHA           the bytes to write: stdin, or (new = old: only the owner or mode
#                     change) PATH's own bytes; checked before they are put in place;
#   mode=OCTAL        the mode; else PATH's own, else what a new file gets here (0666
#                     less the umask);
#   owner=USER[:GROUP]  the owner; else PATH's own (kept, or the write fails);
#   backup=yes        PATH as it was stays as PATH.YYYYMMDDTHHMMSSZ~ (UTC; .1~, .2~ …
#                     when taken), a hard link to it, printed as `backup=NAME`.
# Prints `written` when PATH holds the new file. A link at PATH is never followed or
# replaced; nothing is made but the new file (and the backup's name).
# POSIX sh, mktemp, stat, chmod, chown, ln, mv, date, and sha256sum (or shasum).

main() {
  path=$1
  shift
  old='' new='' mode='' owner='' backup=''
  for w in "$@"; do
    case $w in
      old=*) old=${w#old=} ;;
      new=*) new=${w#new=} ;;
      mode=*) mode=${w#mode=} ;;
      owner=*) owner=${w#owner=} ;;
      backup=yes) backup=yes ;;
      *) fail "unknown word $w" ;;
    esac
  done
  if [ -z "$old" ] || [ -z "$new" ]; then
    fail "old= and new= are required"
  fi
  case $path in
    /?*) ;;
    *) fail "$path is not an absolute path" ;;
  esac
  dir=${path%/*}
  [ -n "$dir" ] || dir=/
  [ -d "$dir" ] || fail "$dir is not a directory (file.put makes no directories); nothing was written"
  [ ! -L "$path" ] || fail "$path is a symbolic link; nothing was written (give the path it points to)"
  if [ -e "$path" ] && [ ! -f "$path" ]; then
    fail "$path is not a regular file; nothing was written"
  fi
  given=$(umask)
  now=none
  if [ -e "$path" ]; then
    now=$(sum "$path") || exit $?
  fi
  [ "$now" = "$old" ] || fail "$path changed since it was read (sha256 $old then, $now now); nothing was written"
  umask 077
  # The traps first, and none of these signals ends mktemp (or the subshell it runs
  # in) between making the file and saying its name: a TERM (a timeout, Ctrl-C) then
  # waits for the assignment, and the trap removes the file.
  tmp=''
  trap '[ -z "$tmp" ] || rm -f -- "$tmp"' EXIT
  trap 'exit 1' HUP INT TERM
  tmp=$(
    trap '' HUP INT TERM
    mktemp "$dir/.runbook-put.XXXXXXXXXX"
  ) || fail "cannot make a file in $dir; nothing was written"
  if [ "$old" = "$new" ]; then
    cat -- "$path" >"$tmp" || fail "cannot copy $path; nothing was written"
  else
    cat >"$tmp" || fail "writing $tmp failed (a full disk?); nothing was written"
  fi
  got=$(sum "$tmp") || exit $?
  [ "$got" = "$new" ] || fail "the bytes arrived with sha256 $got, not $new as sent; nothing was written"
  if [ -n "$owner" ]; then
    chown -- "$owner" "$tmp" 2>/dev/null || fail "cannot give $path to $owner (commands run as uid $(id -u)); nothing was written"
  elif [ -e "$path" ]; then
    was=$(stat -c %u:%g -- "$path") || fail "cannot stat $path"
    mine=$(stat -c %u:%g -- "$tmp") || fail "cannot stat $tmp"
    if [ "$was" != "$mine" ]; then
      chown -- "$was" "$tmp" 2>/dev/null || fail "cannot keep the owner $was of $path (commands run as uid $(id -u)): give owner = … or write it as its owner; nothing was written"
    fi
  fi
  # After chown, which may clear the set-id bits.
  if [ -z "$mode" ]; then
    if [ -e "$path" ]; then
      mode=$(stat -c %a -- "$path") || fail "cannot stat $path"
    else
      mode=$(printf '%o' "$((0666 & ~0$given))")
    fi
  fi
  chmod -- "$mode" "$tmp" || fail "cannot set the mode $mode; nothing was written"
  if [ "$backup" = yes ] && [ -e "$path" ]; then
    stamp=$(date -u +%Y%m%dT%H%M%SZ) || fail "cannot tell the time (date)"
    kept=$path.$stamp~
    n=0
    # ln never follows or replaces what is at the name; a directory there would take
    # the link inside it, so such a name is passed over too.
    while [ -d "$kept" ] || ! ln -- "$path" "$kept" 2>/dev/null; do
      n=$((n + 1))
      [ "$n" -le 9 ] || fail "cannot keep a backup of $path as $kept (taken, or a filesystem without hard links); nothing was written"
      kept=$path.$stamp.$n~
    done
    printf 'backup=%s\n' "$kept"
  fi
  mv -f -- "$tmp" "$path" || fail "cannot rename $tmp over $path; nothing was written"
  trap - EXIT
  echo written
}
