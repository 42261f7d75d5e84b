#!/usr/bin/env bash
# artifact.capture and artifact.restore against the floor of the same work, on this machine:
# `tar -czf` of the cache directory and `tar -xzf` of that archive (what the issue measures
# them by), interleaved rounds, median (min–max) and the ratio of the medians.
#
#   bench/artifact.sh                 # a 100 MB and a 350 MB inductor-like cache, 5 rounds
#   bench/artifact.sh 50 5            # one size (MB) and the rounds
#   CACHE=/path/to/inductor bench/artifact.sh   # a real cache (copied; e2e-torch's, say)
#   ARTIFACT_TSV=FILE bench/artifact.sh …       # also keep the raw times (bench/run's report reads them)
#
# What runbook does on top of tar: reads the key (python, torch, git, nvidia-smi: a few
# commands), checks the paths and the processes using them, and sha256s the archive and
# writes it to the store (capture); checks the sha256 and every entry before it extracts,
# into a staging dir it then renames, the old cache kept aside (restore). The store is
# local (a directory), the target `local`: no network in either figure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
sizes=${1:-"100 350"}
rounds=${2:-5}

# RUNBOOK=path/to/runbook measures that build instead of a fresh release one.
if [ -z "${RUNBOOK:-}" ]; then
  cargo build --release --quiet
fi
runbook=${RUNBOOK:-$root/target/release/runbook}
# Under /var/tmp: a cache root (cache.clear's and artifact's paths must be inside one).
work=$(mktemp -d /var/tmp/runbook-bench-artifact.XXXXXX)
trap 'rm -rf -- "$work"' EXIT
export RUNBOOK_STATE_DIR=$work/state

cat >"$work/capture.lua" <<'LUA'
runbook { name = "bench-capture", params = { cache = { required = true }, store = { required = true } } }
step("capture", function()
  artifact.capture(target("local"), { name = "bench", paths = params.cache, store = params.store })
end)
LUA
cat >"$work/restore.lua" <<'LUA'
runbook { name = "bench-restore", params = { cache = { required = true }, store = { required = true } } }
step("restore", function()
  local r = artifact.restore(target("local"), { name = "bench", paths = params.cache, store = params.store, require = true })
  assert(r.restored or r.planned, r.reason)
end)
LUA

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
: >"$work/times.tsv"
for mb in $sizes; do
  cache=$work/c$mb/inductor
  mkdir -p "$work/c$mb"
  if [ -n "${CACHE:-}" ]; then
    cp -a "$CACHE" "$cache"
  else
    python3 bench/lib/inductor_like.py "$cache" "$mb" >"$work/c$mb.shape"
  fi
  files=$(find "$cache" -type f | wc -l)
  bytes=$(du -sb "$cache" | cut -f1)
  printf 'shape\t%s\t%s\t%s\n' "$mb" "$files" "$bytes" >>"$work/times.tsv"
  sync
  for r in $(seq "$rounds"); do
    # capture: a new store each round (an object already there is not written again).
    rm -rf "$work/store" "$work/floor.tar.gz"
    t=$(date +%s%N)
    "$runbook" run "$work/capture.lua" --yes -q --set "cache=$cache" --set "store=$work/store" >/dev/null 2>>"$work/runs.log"
    printf 'capture\t%s\t%s\trunbook\n' "$mb" "$(ms "$t")" >>"$work/times.tsv"
    t=$(date +%s%N)
    tar -czf "$work/floor.tar.gz" -C "$work/c$mb" inductor
    printf 'capture\t%s\t%s\ttar -czf\n' "$mb" "$(ms "$t")" >>"$work/times.tsv"
    # restore: onto no cache (what a clean reset leaves), from the store just written.
    mv "$cache" "$work/c$mb/orig"
    t=$(date +%s%N)
    "$runbook" run "$work/restore.lua" --yes -q --set "cache=$cache" --set "store=$work/store" >/dev/null 2>>"$work/runs.log"
    printf 'restore\t%s\t%s\trunbook\n' "$mb" "$(ms "$t")" >>"$work/times.tsv"
    rm -rf "$cache" "$cache".* "$work/c$mb"/.inductor* 2>/dev/null || true
    t=$(date +%s%N)
    tar -xzf "$work/floor.tar.gz" -C "$work/c$mb"
    printf 'restore\t%s\t%s\ttar -xzf\n' "$mb" "$(ms "$t")" >>"$work/times.tsv"
    rm -rf "$cache"
    mv "$work/c$mb/orig" "$cache"
  done
  # Everything the restores left beside the cache (staging, the old one kept aside).
  rm -rf "$work/c$mb"
done

[ -z "${ARTIFACT_TSV:-}" ] || cp "$work/times.tsv" "$ARTIFACT_TSV"
python3 - "$work/times.tsv" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(git rev-parse --short HEAD)" <<'PY'
import statistics, sys
from collections import defaultdict
path, cores, load, commit = sys.argv[1:5]
t, shape = defaultdict(list), {}
for line in open(path):
    f = line.rstrip("\n").split("\t")
    if f[0] == "shape":
        shape[f[1]] = (int(f[2]), int(f[3]))
    else:
        t[(f[0], f[1], f[3])].append(int(f[2]))
def fmt(v):
    return f"{statistics.median(v):.0f} ({min(v)}–{max(v)})"
print(f"commit {commit}, {cores} cores, load {load} at the end, {len(next(iter(t.values())))} rounds\n")
print("| cache | what | runbook ms | floor ms | runbook / floor |")
print("|---|---|---|---|---|")
for mb, (files, size) in shape.items():
    for what, floor in (("capture", "tar -czf"), ("restore", "tar -xzf")):
        a, b = t[(what, mb, "runbook")], t[(what, mb, floor)]
        ratio = statistics.median(a) / statistics.median(b)
        print(f"| {size / 1e6:.0f} MB, {files} files | {what} vs `{floor}` | {fmt(a)} | {fmt(b)} | {ratio:.2f}× |")
PY
