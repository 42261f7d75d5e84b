# script: venv-build.sh
# for: venv.build
# args: uv venv python mode verify pip_args...
# `$1` uv, `$2` venv path, `$3` python for `uv venv` (empty: uv's choice), `$4` `fresh` or
# `in-place`, `$5` verify code (empty: only check that the interpreter starts); the rest
# are the arguments of `uv pip install` (none: create only).
#
# Fresh: build in `PATH.runbook-new-<ts>` (relocatable, because it is renamed after the
# build), verify, then swap with two renames. A true atomic exchange
# (renameat2 RENAME_EXCHANGE, `mv --exchange`) is not available from portable sh: it
# needs coreutils 9.5+ and a filesystem that supports it. So for the moment between the
# two renames PATH does not exist; a failed second rename puts the old venv back. The
# venv is checked again where it finally lives, and the old one is restored if that
# fails; only then is the old one deleted (a venv with torch is gigabytes: keeping every
# previous one would fill disks). Any failure, or a kill, removes the half-built dir
# (EXIT trap; the signal traps make sh run it) and leaves PATH untouched. A failed verify
# exits 4 after naming the venv it ran in (see `VERIFY_FAILED`): `failure` renders the check
# as a command line with `quote`, as no text pasted together in sh could (the code is
# any Python, quotes included). SIGPIPE is
# ignored because runbook stops reading the output when it stops a command: sh's own
# notice about the killed child would otherwise kill sh before its trap. Leftovers of a
# build killed too hard to clean up are removed by the next fresh build of that PATH.
set -u
uv=$1 path=$2 py=$3 mode=$4 verify=${5:-pass}
shift 5
say() { printf 'venv.build: %s\n' "$*" >&2; }
mkvenv() {
  if [ -n "$py" ]; then "$uv" venv --relocatable --python "$py" "$1"; else "$uv" venv --relocatable "$1"; fi
}
check() { (cd / && "$1/bin/python" -c "$verify"); }
if [ -e "$path" ] && [ ! -f "$path/pyvenv.cfg" ]; then
  say "$path exists and is not a virtual environment (no pyvenv.cfg): refusing to replace it"; exit 3
fi
if [ "$mode" = in-place ]; then
  dir=$path
  if [ ! -e "$dir" ]; then mkvenv "$dir" || { rm -rf -- "$dir"; exit 1; }; fi
else
  ts=$(date -u +%Y%m%dT%H%M%SZ)
  dir=$path.runbook-new-$ts old=$path.runbook-old-$ts
  rm -rf -- "$path".runbook-new-* "$path".runbook-old-*
  trap 'rm -rf -- "$dir"' EXIT
  trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM; trap '' PIPE
  mkvenv "$dir" || exit 1
fi
if [ "$#" -gt 0 ]; then "$uv" pip install --python "$dir/bin/python" "$@" || exit 1; fi
check "$dir" || { say "verify failed in $dir"; exit 4; }
[ "$mode" = in-place ] && exit 0
if [ -e "$path" ]; then
  mv -T -- "$path" "$old" || exit 1
  if ! mv -T -- "$dir" "$path"; then
    mv -T -- "$old" "$path"; say "could not move the new venv into place; the old one is back"; exit 1
  fi
else
  old=
  mv -T -- "$dir" "$path" || exit 1
fi
if ! check "$path"; then
  mv -T -- "$path" "$dir"
  if [ -n "$old" ]; then mv -T -- "$old" "$path"; fi
  say "the new venv failed its check once moved to $path${old:+; the old one is back}"; exit 1
fi
if [ -n "$old" ]; then rm -rf -- "$old"; fi
trap - EXIT
