# size.sh: the one definition of how big a cache is, for every script that measures one
# (cache.rs's probe, fingerprint.sh, measure.sh: each is followed or preceded by this
# file, which only defines size_of and runs nothing).
#
# size_of PATH prints "BYTES FILES": the apparent size (st_size, what `ls -l` shows)
# summed over the regular files at or under PATH, and how many there are. Directories,
# symlinks and special files count for nothing: a directory's own size depends on the
# filesystem (4 KiB on ext4, other sizes on tmpfs or btrfs) and disk usage (du's blocks)
# on block size and sparseness, so neither would compare across targets or with what a
# program wrote. PATH itself is followed when it is a symlink (find -H), nothing under it
# is: a link out of a cache is not part of it. du -b and --apparent-size are GNU only
# (busybox has neither), so the sizes come from find: GNU find prints them itself
# (-printf), elsewhere stat -c %s does, many files per call. awk sums in doubles: exact
# up to 8 PiB. Unreadable parts count for nothing rather than fail the measure.
size_of() {
  _sz=$1
  case $_sz in -*) _sz=./$_sz ;; esac # never an option to find
  if find -H / -maxdepth 0 -printf '' 2>/dev/null; then
    find -H "$_sz" -type f -printf '%s\n' 2>/dev/null
  else
    find -H "$_sz" -type f -exec stat -c %s -- {} + 2>/dev/null
  fi | awk '{ b += $1; n++ } END { printf "%.0f %.0f\n", b, n }'
}
