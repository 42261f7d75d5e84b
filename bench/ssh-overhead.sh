#!/usr/bin/env bash
# Per-command overhead over SSH on loopback: runbook (one multiplexed master, a channel
# per command) beside a loop of `ssh -S <control socket>` (a process per command over
# one master), a loop of fresh `ssh` (a connection per command) and one `ssh` that runs
# all commands in one shell (the lower bound). Interleaved rounds; median (min–max).
# Usage: bench/ssh-overhead.sh [N commands, default 200] [rounds, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200}; ROUNDS=${2:-5}
source bench/lib/sshd.sh
cargo build --release -q
bin=$PWD/target/release/runbook
work=$(mktemp -d /tmp/rb-bench.XXXXXX)
trap 'fleet_stop; ssh -F "$FLEET_CFG" -S "$work/ctl" -O exit node1 2>/dev/null; rm -rf "$work"' EXIT
fleet_start "$work/fleet" 1
export RUNBOOK_STATE_DIR=$work/state

cat >"$work/loop.lua" <<LUA
runbook { name = "ssh-loop", params = { n = { type = "integer", default = $N } } }
local node = target("node1")
step("commands", function()
  for i = 1, params.n do node:exec({ "true" }, { read_only = true }) end
end)
LUA

declare -A T
run_case() { # name, command...
  local name=$1; shift
  local s e; s=$(now_ms); "$@" >/dev/null 2>&1; e=$(now_ms)
  T[$name]="${T[$name]:-} $(awk -v s="$s" -v e="$e" 'BEGIN{printf "%.3f", e-s}')"
}
ssh_S_loop() { for _ in $(seq "$N"); do ssh -F "$FLEET_CFG" -S "$work/ctl" -o ControlMaster=no node1 true; done; }
ssh_fresh_loop() { for _ in $(seq "$N"); do ssh -F "$FLEET_CFG" -o ControlMaster=no -o ControlPath=none node1 true; done; }
one_ssh() { ssh -F "$FLEET_CFG" -o ControlPath=none node1 "$(printf 'true; %.0s' $(seq "$N"))"; }
one_ssh_procs() { ssh -F "$FLEET_CFG" -o ControlPath=none node1 "$(printf '/bin/true; %.0s' $(seq "$N"))"; }

ssh -F "$FLEET_CFG" -S "$work/ctl" -M -f -N -o ControlPersist=600 node1
for r in $(seq "$ROUNDS"); do
  run_case runbook "$bin" run "$work/loop.lua" --ssh-config "$FLEET_CFG" --yes
  run_case ssh_S ssh_S_loop
  run_case one_ssh one_ssh
  run_case one_ssh_procs one_ssh_procs
  [ "$r" -le 2 ] && run_case ssh_fresh ssh_fresh_loop
done

base=$(median_of ${T[one_ssh]})
rbm=$(median_of ${T[runbook]})
echo "$N trivial commands on one host over loopback SSH; $ROUNDS interleaved rounds (fresh ssh: 2); $(nproc) cores"
echo
echo "| tool | total ms, median (min–max) | per command ms | vs runbook |"
echo "|---|---|---|---|"
for k in runbook ssh_S ssh_fresh one_ssh_procs one_ssh; do
  v=(${T[$k]}); m=$(median_of "${v[@]}")
  per=$(awk -v m="$m" -v n="$N" 'BEGIN{printf "%.2f", m/n}')
  ratio=$(awk -v m="$m" -v r="$rbm" 'BEGIN{printf "%.2f×", m/r}')
  label=$k
  case $k in
    runbook) label="runbook (one master, channel per command; includes start-up and connect)";;
    ssh_S) label="loop of \`ssh -S ctl\` (process per command, one master)";;
    ssh_fresh) label="loop of fresh \`ssh\` (connection per command)";;
    one_ssh) label="one \`ssh\` running the shell builtin \`true\` N times (lower bound)";;
    one_ssh_procs) label="one \`ssh\` running \`/bin/true\` N times (a process per command, no channel)";;
  esac
  echo "| $label | $m ($(min_of "${v[@]}")–$(max_of "${v[@]}")) | $per | $ratio |"
done
over=$(awk -v a="$rbm" -v b="$base" -v n="$N" 'BEGIN{printf "%.2f", (a-b)/n}')
echo
echo "runbook's overhead over the lower bound: $over ms per command."
