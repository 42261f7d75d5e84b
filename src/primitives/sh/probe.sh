# script: cache-probe.sh
# for: cache.clear, cache.restore, cache.size
# made of: probe.sh size.sh lib.sh
# args: mode nroots roots_then_paths...
# probe.sh MODE NROOTS ROOT... PATH...: looks at the roots and paths, as the user of
# the target (size.sh and lib.sh follow this; lib.sh runs main), for cache.rs to decide
# on. Mode `clear` measures and scans (mounts, processes) only paths strictly inside a
# root: a refused `/` or `/usr` must not cost a walk of the disk; `restore` measures
# those and looks for mounts (a forced restore deletes); `size` measures every path.
# Sizes are size_of's (size.sh): apparent bytes of the regular files.
# Prints tab-separated records (see `parse`) and `end` last, so a cut-off answer shows.
# shellcheck disable=SC2154 # nl is set in lib.sh; size_of is in size.sh

canon() { # $1 with every symlink followed; a part that does not exist yet is kept as is
  p=$1 rest=
  while [ ! -e "$p" ] && [ ! -L "$p" ]; do
    rest=/${p##*/}$rest
    p=${p%/*}
    p=${p:-/}
  done
  # readlink's own newline and a "." after it: $(…) would take a name's trailing ones too.
  if r=$(readlink -f "$p" 2>/dev/null && echo .); then
    r=${r%.}
    r=${r%"$nl"}
  else
    r=$p
  fi
  [ "$r" = / ] && r=
  r=$r$rest
  # The "." keeps a name's trailing newlines through the caller's $(…) (it takes it off).
  printf '%s.' "${r:-/}"
}
plain() { # whether $1 has no tab and no newline: one in a record would end its field or line
  case $1 in *"$tab"* | *"$nl"*) return 1 ;; esac
}
links() { # "DIR<tab>TARGET" for the cwd and every open file of every process
  if find /proc/self/cwd -maxdepth 0 -printf '' 2>/dev/null; then
    find /proc/[0-9]*/cwd /proc/[0-9]*/fd -maxdepth 1 -type l -printf '%h\t%l\n' 2>/dev/null
  else # no GNU find: one readlink per link, slower
    for l in /proc/[0-9]*/cwd /proc/[0-9]*/fd/*; do
      printf '%s\t%s\n' "${l%/*}" "$(readlink "$l" 2>/dev/null)"
    done
  fi
}
holders() { # pids of the processes with an open file, a mapped file or their cwd under $1
  if [ -d /proc/self/fd ]; then
    {
      links | D=$1 awk -F'\t' 'BEGIN { d = ENVIRON["D"] }
        $2 == d || index($2, d "/") == 1 { split($1, a, "/"); print a[3] }'
      grep -sHF -- " $1/" /proc/[0-9]*/maps | sed -n 's|^/proc/\([0-9]*\)/maps:.*|\1|p'
    } | sort -un
  elif command -v lsof >/dev/null 2>&1; then
    lsof -t +D "$1" 2>/dev/null
  fi
}
inside() { # whether $1 is strictly inside a root (the Rust side decides; this bounds work)
  set -f
  IFS=$nl
  found=1
  for root in $roots; do
    case $root in /) continue ;; esac # never a usable root
    case $1 in "$root"/?*) found=0 ;; esac
  done
  set +f
  unset IFS
  return $found
}

main() {
  mode=$1
  nroots=$2
  shift 2
  cd / || exit 1 # our own working directory must not count as a process using a path
  tab=$(printf '\t')
  # A name is printed as it is, so one with a tab or a newline (a symlink on the way can
  # lead to such a directory) could add records of its own: it is never printed, and
  # cache.rs refuses what it stands for (`unusable`).
  h=$(canon "${HOME:-/nonexistent}")
  h=${h%.}
  if plain "${HOME:-}" && plain "$h"; then
    printf 'home\t%s\t%s\n' "${HOME:-}" "$h"
  else
    printf 'unusable\thome\t0\n'
  fi
  roots='' i=0
  while [ "$i" -lt "$nroots" ]; do
    i=$((i + 1))
    e=$(expand "$1")
    shift
    r=$(canon "$e")
    r=${r%.}
    if ! plain "$e" || ! plain "$r"; then
      printf 'unusable\troot\t%s\n' "$i"
      continue
    fi
    roots=$roots$r$nl
    printf 'root\t%s\t%s\t%s\n' "$i" "$e" "$r"
  done
  i=0
  for p in "$@"; do
    i=$((i + 1))
    e=$(expand "$p")
    r=$(canon "$e")
    r=${r%.}
    if ! plain "$e" || ! plain "$r"; then
      printf 'unusable\tpath\t%s\n' "$i"
      continue
    fi
    if [ -L "$e" ]; then
      kind='link'
    elif [ -d "$e" ]; then
      kind='dir'
    elif [ -e "$e" ]; then
      kind='file'
    else
      kind='absent'
    fi
    bytes=0 files=0 empty=0 look=
    if [ -e "$r" ] && { [ "$mode" = size ] || inside "$r"; }; then look=1; fi
    if [ -n "$look" ]; then
      sz=$(size_of "$r")
      bytes=${sz% *} files=${sz#* }
      if [ -d "$r" ] && [ -z "$(ls -A "$r" 2>/dev/null)" ]; then empty=1; fi
    fi
    printf 'path\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$e" "$r" "$kind" "$bytes" "$files" "$empty"
    # Beside the resolved path: where move_aside.sh puts them and restore.sh looks. Their
    # sizes are what a clear's pruning frees and a restore brings back (measured only
    # then: a kept copy can be as big as the cache).
    for k in "$r"'.runbook-kept-'*; do
      if [ -e "$k" ] && [ ! -L "$k" ] && plain "$k"; then
        sz='0 0'
        if [ "$mode" != size ] && [ -n "$look" ]; then sz=$(size_of "$k"); fi
        printf 'kept\t%s\t%s\t%s\t%s\n' "$i" "${sz% *}" "${sz#* }" "$k"
      fi
    done
    if [ "$mode" != size ] && [ -n "$look" ]; then
      # As /proc/self/mounts writes them (no tab or newline in a line); cache.rs decodes.
      mounts_under "$r" | while IFS= read -r m; do printf 'mount\t%s\t%s\n' "$i" "$m"; done
    fi
    if [ "$mode" = clear ] && [ -n "$look" ]; then
      for pid in $(holders "$r"); do
        [ "$pid" != $$ ] || continue
        cmd=$(tr '\0\t\n' '   ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)
        printf 'holder\t%s\t%s\t%s\n' "$i" "$pid" "${cmd:-?}"
      done
    fi
  done
  echo end
}
