#!/usr/bin/env bash
# Engine speed: start-up, `check` and `--dry-run` of a 1,000-step runbook, peak memory.
# Usage: bench/engine.sh   (builds the release binary; prints a Markdown table)
# Timings are medians over repeated runs on a shared, noisy machine: read them as
# orders of magnitude, not as exact figures. Nothing here is asserted by tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
bin=target/release/runbook
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RUNBOOK_STATE_DIR="$work/state"

# A 1,000-step runbook: each step plans one change (bench/lib/steps.sh, as bench/run's).
source bench/lib/steps.sh
gen_steps 1000 "$work/big.lua"

median_ms() { # runs "$@" N times, prints the median wall time in ms
  local n=${N:-21} times=()
  for _ in $(seq "$n"); do
    local s e
    s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N)
    times+=($(( (e - s) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'
}

peak_kib() { # max RSS of one run, KiB
  /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -1
}

echo "| what | median ms | peak RSS KiB |"
echo "|---|---|---|"
echo "| \`runbook --version\` | $(median_ms $bin --version) | $(peak_kib $bin --version) |"
echo "| \`runbook check\` 1,000 steps | $(median_ms $bin check "$work/big.lua") | $(peak_kib $bin check "$work/big.lua") |"
echo "| \`runbook run --dry-run\` 1,000 steps | $(N=11 median_ms $bin run "$work/big.lua" --dry-run) | $(peak_kib $bin run "$work/big.lua" --dry-run) |"
echo "| \`runbook run --dry-run --json\` 1,000 steps | $(N=11 median_ms $bin run "$work/big.lua" --dry-run --json) | $(peak_kib $bin run "$work/big.lua" --dry-run --json) |"
echo "| \`true\` (process start-up floor) | $(median_ms true) | $(peak_kib true) |"
