#!/usr/bin/env bash
# Engine speed: start-up, `check` of a 30-step and a 1,000-step runbook, `--dry-run` of
# 50 and 1,000 steps, peak memory, and the ratios issue 32 sets goals for.
# Usage: bench/engine.sh   (builds the release binary; prints Markdown tables)
#        ROUNDS=41 bench/engine.sh   (interleaved rounds; default 31)
#        BIN=/path/to/runbook bench/engine.sh   (that binary, e.g. an older build, unbuilt)
# Timings are medians (min-max) over interleaved rounds on a shared, noisy machine: read
# them as orders of magnitude, not as exact figures. Nothing here is asserted by tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then cargo build --release -q; fi
bin=${BIN:-target/release/runbook}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RUNBOOK_STATE_DIR="$work/state"
rounds=${ROUNDS:-31}

# N steps, each planning one change (bench/lib/steps.sh, as bench/run's).
# shellcheck source=bench/lib/steps.sh
source bench/lib/steps.sh
gen_steps 1000 "$work/big.lua"
gen_steps 30 "$work/small.lua"
# bench/run's dry.lua: 50 changes on an ssh host that a dry-run never contacts.
{
  echo 'runbook { name = "bench-dry", description = "50 steps, one change each" }'
  echo 'local node = target("node1")'
  for i in $(seq 50); do echo "step(\"touch $i\", function() node:exec({ \"touch\", \"/tmp/rb-bench-dry-$$/f$i\" }) end)"; done
} >"$work/dry.lua"
printf 'Host node1\n  HostName 127.0.0.1\n  Port 9\n' >"$work/ssh_config"

names=(true version check30 check1000 dry50 dry1000 dry1000json)
argv_of() { # sets A to the command line of case $1
  case $1 in
    true) A=(/bin/true) ;;
    version) A=("$bin" --version) ;;
    check30) A=("$bin" check "$work/small.lua") ;;
    check1000) A=("$bin" check "$work/big.lua") ;;
    dry50) A=("$bin" run "$work/dry.lua" --ssh-config "$work/ssh_config" --dry-run) ;;
    dry1000) A=("$bin" run "$work/big.lua" --dry-run) ;;
    dry1000json) A=("$bin" run "$work/big.lua" --dry-run --json) ;;
  esac
}
declare -A times
for r in $(seq "$rounds"); do
  # Interleaved: every case once per round, in an order rotated each round.
  n=${#names[@]}
  for k in $(seq 0 $((n - 1))); do
    name=${names[$(((k + r) % n))]}
    argv_of "$name"
    # bash's own clock: a `date` process around each run would be timed with it.
    s=${EPOCHREALTIME/./}
    "${A[@]}" >/dev/null 2>&1 || true
    e=${EPOCHREALTIME/./}
    times[$name]+="$((e - s)) "
  done
done

median() { # microseconds -> "median (min-max)" in ms; the bare median with -n
  tr ' ' '\n' <<<"${times[$1]}" | grep . | sort -n | awk -v bare="${2:-}" '{a[NR]=$1} END {
    m = a[int((NR + 1) / 2)] / 1000
    if (bare != "") printf "%.3f", m; else printf "%.2f (%.2f-%.2f)", m, a[1] / 1000, a[NR] / 1000 }'
}
peak_kib() { # median max RSS of 3 runs, KiB
  argv_of "$1"
  for _ in 1 2 3; do /usr/bin/time -f '%M' "${A[@]}" 2>&1 >/dev/null | tail -1; done | sort -n | sed -n 2p
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $rounds interleaved rounds"
echo
echo "| what | median ms (min-max) | peak RSS KiB |"
echo "|---|---|---|"
echo "| \`true\` (process start-up floor) | $(median true) | $(peak_kib true) |"
echo "| \`runbook --version\` | $(median version) | $(peak_kib version) |"
echo "| \`runbook check\` 30 steps | $(median check30) | $(peak_kib check30) |"
echo "| \`runbook check\` 1,000 steps | $(median check1000) | $(peak_kib check1000) |"
echo "| \`runbook run --dry-run\` 50 steps on an ssh host | $(median dry50) | $(peak_kib dry50) |"
echo "| \`runbook run --dry-run\` 1,000 steps | $(median dry1000) | $(peak_kib dry1000) |"
echo "| \`runbook run --dry-run --json\` 1,000 steps | $(median dry1000json) | $(peak_kib dry1000json) |"
echo
v=$(median version -n) c30=$(median check30 -n) c1k=$(median check1000 -n) d50=$(median dry50 -n)
rss1k=$(peak_kib check1000)
echo "| issue 32 item 2 | measured | goal |"
echo "|---|---|---|"
awk -v v="$v" -v c30="$c30" -v c1k="$c1k" -v d50="$d50" -v rss="$rss1k" 'BEGIN {
  printf "| check of 1,000 steps / check of 30 steps | %.2fx | <= 2.5x |\n", c1k / c30
  printf "| peak RSS of the check of 1,000 steps | %.1f MB | <= 12 MB |\n", rss / 1024
  printf "| check of 30 steps / `--version` | %.2fx | <= 2x |\n", c30 / v
  printf "| dry-run of 50 steps - `--version` | %.2f ms | <= 5 ms |\n", d50 - v
}'
