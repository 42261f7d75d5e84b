# sig SIGNAL GROUP: signals every process in process group GROUP (a number). dash and
# bash want `--` before the negative pid; busybox refuses it ("invalid number '--'")
# while still returning 1, so both spellings are tried. Prepended to the scripts that
# stop process trees: kill_tree.sh, orphan.sh, proc_stop.sh.
sig() {
  kill -s "$1" -- "-$2" 2>/dev/null || kill -s "$1" "-$2" 2>/dev/null
}
