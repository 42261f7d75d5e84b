# runbook_dir: prints runbook's own directory on this machine, for the user running the
# command: $XDG_RUNTIME_DIR/runbook, else ~/.local/state/runbook. Only that user can
# write there (0700, owned by them, not a symlink), so no other user can plant a lock, a
# pid file or a symlink in it, as anyone can in /tmp. Fails (status 1, a message on
# stderr) rather than use a directory it cannot trust.
runbook_dir() {
  _rb_base=${XDG_RUNTIME_DIR:-}
  if [ -z "$_rb_base" ] || [ ! -d "$_rb_base" ]; then
    _rb_home=${HOME:-}
    # lxc-attach --clear-env (PVE 9) gives no HOME; root's is known.
    if [ -z "$_rb_home" ] && [ "$(id -u)" = 0 ]; then _rb_home=/root; fi
    [ -n "$_rb_home" ] || { echo "runbook: neither XDG_RUNTIME_DIR nor HOME is set" >&2; return 1; }
    _rb_base=$_rb_home/.local/state
  fi
  _rb_dir=$_rb_base/runbook
  if [ ! -e "$_rb_dir" ] && [ ! -L "$_rb_dir" ]; then
    if ! mkdir -p -- "$_rb_base" || ! mkdir -m 700 -- "$_rb_dir"; then
      echo "runbook: cannot create $_rb_dir" >&2
      return 1
    fi
  fi
  if [ -L "$_rb_dir" ] || [ ! -d "$_rb_dir" ]; then
    echo "runbook: $_rb_dir is not a plain directory (a symlink?); refusing to use it" >&2
    return 1
  fi
  # ls -n is the owner check that dash, bash and busybox all have.
  # shellcheck disable=SC2012
  _rb_owner=$(ls -ldn -- "$_rb_dir" | awk '{ print $3 }')
  if [ "$_rb_owner" != "$(id -u)" ]; then
    echo "runbook: $_rb_dir belongs to uid $_rb_owner, not to $(id -u); refusing to use it" >&2
    return 1
  fi
  chmod 700 -- "$_rb_dir" || return 1
  printf '%s\n' "$_rb_dir"
}
