# script: need.sh
# for: warmup.run
# args: program why
# need.sh PROGRAM WHY: succeeds when PROGRAM runs here (a name found on PATH, a builtin,
# or an executable file given by path); otherwise prints `needs PROGRAM (WHY)` on stderr
# and exits 127. Primitives run it as a read before their first change, so a missing
# program is reported before anything changed (mod.rs: `Step::need`).
p=$(command -v -- "$1" 2>/dev/null) || p=
case $p in
  '') ok=0 ;;
  */*) if [ -x "$p" ] && [ ! -d "$p" ]; then ok=1; else ok=0; fi ;;
  *) ok=1 ;; # a builtin or a busybox applet
esac
[ "$ok" = 1 ] || { printf 'needs %s (%s)\n' "$1" "$2" >&2; exit 127; }
printf '%s\n' "$p"
