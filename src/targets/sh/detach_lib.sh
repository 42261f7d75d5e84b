# Shared by the detach-*.sh scripts (after runbook_dir.sh): where a detached command
# keeps what it leaves behind.
#
# job_dir JOB: prints JOB's directory, $(runbook_dir)/jobs/JOB (0700, in runbook's own
# 0700 directory: no other user can read its output or plant a file in it), and fails,
# saying so, for a JOB that is not a job id (hex, as runbook makes them).
job_dir() {
  case $1 in
    '' | *[!0-9a-f]*) echo "runbook: $1 is not a job id" >&2; return 2 ;;
    *) ;;
  esac
  _rb_d=$(runbook_dir) || return 1
  printf '%s\n' "$_rb_d/jobs/$1"
}

# num FILE: FILE's size in bytes (0 when it is not there yet); `wc -c` pads it with
# blanks on some systems, which $(( )) drops.
num() {
  if [ -f "$1" ]; then echo $(($(wc -c <"$1"))); else echo 0; fi
}
