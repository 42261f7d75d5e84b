# script: venv-probe.sh
# for: venv.build
# args: uv venv python
# Finds uv (the given path, else PATH, `~/.local/bin`, `~/.cargo/bin`), the Python it
# would make a venv with (`uv python find`, `$3` the `python` asked for or empty), python3
# (for install_uv) and what is at the venv path. `$1` = uv's given path or empty, `$2` =
# venv path. Prints `key=value` lines; always exits 0 so that what is missing is reported
# by runbook, not by sh.
# lxc-attach --clear-env (PVE 9's `pct exec`) gives no HOME: `~` is then the user's home
# from the passwd file, as a login would set it (else `~/.cache` read as `/.cache`).
[ -n "${HOME:-}" ] || HOME=$(awk -F: -v u="$(id -u)" '$3 == u { print $6; exit }' /etc/passwd 2>/dev/null)
uv=$1
if [ -z "$uv" ]; then
  uv=$(command -v uv 2>/dev/null) || uv=
  for c in "$HOME/.local/bin/uv" "$HOME/.cargo/bin/uv"; do
    if [ -z "$uv" ] && [ -x "$c" ]; then uv=$c; fi
  done
fi
printf 'home=%s\n' "$HOME"
if [ -n "$uv" ] && v=$("$uv" --version 2>/dev/null); then
  printf 'uv=%s\nuv_version=%s\n' "$uv" "$v"
  if p=$("$uv" python find ${3:+"$3"} 2>&1); then printf 'python=%s\n' "$p"
  else printf 'no_python=%s\n' "$(printf '%s\n' "$p" | sed -n '$p')"; fi
fi
if p=$(command -v python3 2>/dev/null); then printf 'python3=%s\n' "$p"; fi
if [ -f "$2/pyvenv.cfg" ]; then
  printf 'venv=yes\n'
  if v=$("$2/bin/python" -c 'import platform; print(platform.python_version())' 2>/dev/null); then printf 'venv_python=%s\n' "$v"; fi
elif [ -e "$2" ] || [ -L "$2" ]; then printf 'venv=other\n'
else printf 'venv=none\n'
fi
