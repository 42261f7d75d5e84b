# script: gpu-kernel-log.sh
# for: gpu.health
# made of: gpu_kernel_log.sh main.sh
# gpu_kernel_log.sh: the NVIDIA Xid lines of the kernel log, for gpu/kernel_log.rs.
# `dmesg` first; where it is refused (kernel.dmesg_restrict, a container) or missing,
# `journalctl -k -b -o short-monotonic`, whose lines carry the same `[seconds since boot]`
# stamp. Each source's answer is cut down here to what is read, so a long kernel log
# does not cross the connection: `source NAME`, then its Xid lines (`xid LINE`, at most
# 2000: a storm repeats one line), `lines N` (how many lines it had: none means it could
# not see the kernel's log, as a container's journal cannot), `first LINE` (where the
# buffer begins: an old ring buffer has lost its first lines), `xids N`, `status N` (its
# exit status) and `said LINE` (its last line, which says why it failed).
# `uptime S` comes first: what a `since` is measured against.

scan() {
  { "$@" 2>&1; printf '\n@status %s\n' "$?"; } | awk '
    /^@status / { status = $2; next }
    # journalctl notices, not kernel lines (an old journalctl prints them despite -q).
    /^-- / || /^No journal files were found/ { next }
    /NVRM: Xid/ { if (xids < 2000) print "xid " $0; xids++ }
    NF { n++; if (n == 1) print "first " $0; said = $0 }
    END {
      print "lines " n + 0
      print "xids " xids + 0
      print "status " status
      print "said " said
    }'
}

# Whether a scan's answer ($1) is a log that was read: exit 0 and some lines.
read_ok() {
  case "$1" in
    *"
lines 0
"*) return 1 ;;
    *"
status 0
"*) return 0 ;;
  esac
  return 1
}

main() {
  up=
  if [ -r /proc/uptime ]; then
    read -r up _ </proc/uptime
  fi
  printf 'uptime %s\n' "${up:--}"
  if command -v dmesg >/dev/null 2>&1; then
    out=$(scan dmesg)
    printf 'source dmesg\n%s\n' "$out"
    read_ok "$out" && return 0
  else
    printf 'source dmesg\nlines 0\nxids 0\nstatus 127\nsaid dmesg: not found\n'
  fi
  if command -v journalctl >/dev/null 2>&1; then
    out=$(scan journalctl -k -b -o short-monotonic --no-pager -q)
    printf 'source journalctl\n%s\n' "$out"
  else
    printf 'source journalctl\nlines 0\nxids 0\nstatus 127\nsaid journalctl: not found\n'
  fi
}
