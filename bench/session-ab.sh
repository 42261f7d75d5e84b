#!/usr/bin/env bash
# bench/session-ab.sh BIN [BIN...]: per-command cost of runbook's session beside its
# floor (bench/lib/floor.py, process mode), for one or more runbook binaries at once
# (say, a branch's and main's), over one sshd on 127.0.0.1 (bench/lib/sshd.sh, the
# `pct` double on its PATH). Rounds are interleaved, the order rotated each round; a
# round runs every case at each N. Prints, per case, the median wall time at each N,
# the marginal (median at the largest N - median at the smallest) / (their difference),
# and the marginal CPU per command on each side: this machine's client (the command
# and every process under it, daemonised ssh masters too: the driver is a child
# subreaper) and the target's (the sshd listener's reaped children: sessions, loops,
# commands). On a shared machine the CPU columns move less than the wall ones.
#
#   ROUNDS=20 NS="50 200" bench/session-ab.sh target/release/runbook /tmp/runbook-main
#
# Cases: floor; for each BIN, `runbook run` of N `exec`s on the host (ssh) and in a
# `pct` container there (pct), as bench/run does. Not part of bench/run: RESULTS.md
# has the full tables; this is for A/B work on the session loop (issue 32).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ "$#" -ge 1 ] || { echo "usage: bench/session-ab.sh BIN [BIN...]" >&2; exit 2; }
ROUNDS=${ROUNDS:-20}
NS=${NS:-"50 200"}
# shellcheck source=bench/lib/sshd.sh
source bench/lib/sshd.sh
work=$(mktemp -d /var/tmp/rb-ab.XXXXXX)
trap 'fleet_stop; rm -rf "$work"' EXIT
FLEET_PATH_FIRST=$ROOT/tests/bin fleet_start "$work/fleet" 1
CFG=$FLEET_CFG
SSHD=${FLEET_PIDS[0]}
for kind in loop pct; do
  {
    echo "runbook { name = \"ab-$kind\", params = { n = { type = \"integer\", default = 50 } } }"
    if [ "$kind" = loop ]; then echo 'local t = target("node1")'; else echo 'local t = target("node1"):pct(200)'; fi
    echo 'step("commands", function() for i = 1, params.n do t:exec({ "true" }, { read_only = true }) end end)'
  } >"$work/$kind.lua"
done
# One run: wall ms, client CPU ms, target CPU ms, exit status.
cat >"$work/one.py" <<'PY'
import ctypes, os, resource, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
tick = os.sysconf("SC_CLK_TCK")
def target(pid):  # the sshd listener's cutime + cstime: its reaped sessions
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[13]) + int(f[14])) * 1000 / tick
sshd, log, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
t0, w0 = target(sshd), time.perf_counter()
pid = os.fork()
if pid == 0:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(os.open("/dev/null", os.O_RDONLY), 0); os.dup2(fd, 1); os.dup2(fd, 2)
    os.execvp(cmd[0], cmd)
rc, w1 = None, None
while True:
    try:
        p, st = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    if p == pid:
        rc, w1 = os.waitstatus_to_exitcode(st), time.perf_counter()
time.sleep(0.05)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{(w1 - w0) * 1000:.3f} {(ru.ru_utime + ru.ru_stime) * 1000:.1f} {target(sshd) - t0:.1f} {rc}")
PY
cases=(floor)
for i in $(seq "$#"); do cases+=("ssh:$i" "pct:$i"); done
BINS=("$@")
TSV=$work/times.tsv
: >"$TSV"
run_case() { # CASE N
  local c=$1 n=$2 bin
  case $c in
    floor) set -- python3 "$ROOT/bench/lib/floor.py" "$CFG" node1 "$n" process true ;;
    ssh:*) bin=${BINS[$((${c#ssh:} - 1))]}
      set -- env RUNBOOK_STATE_DIR="$work/state" "$bin" run "$work/loop.lua" --ssh-config "$CFG" --yes --set n="$n" ;;
    pct:*) bin=${BINS[$((${c#pct:} - 1))]}
      set -- env RUNBOOK_STATE_DIR="$work/state" "$bin" run "$work/pct.lua" --ssh-config "$CFG" --yes --set n="$n" ;;
  esac
  python3 "$work/one.py" "$SSHD" "$work/log" "$@"
}
for r in $(seq "$ROUNDS"); do
  for n in $NS; do
    len=${#cases[@]}
    for i in $(seq 0 $((len - 1))); do
      c=${cases[$(((i + r - 1) % len))]}
      read -r ms ccpu tcpu rc <<<"$(run_case "$c" "$n")"
      [ "$rc" = 0 ] || { echo "session-ab: $c at N=$n failed (exit $rc):" >&2; tail -5 "$work/log" >&2; exit 1; }
      printf '%s\t%s\t%s\t%s\t%s\n' "$c" "$n" "$ms" "$ccpu" "$tcpu" >>"$TSV"
    done
  done
done
python3 - "$TSV" "$@" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    c, n, ms, cc, tc = line.split("\t")
    rows[(c, int(n))].append((float(ms), float(cc), float(tc)))
bins = sys.argv[2:]
ns = sorted({n for _, n in rows}); lo, hi = ns[0], ns[-1]
med = lambda xs: statistics.median(xs)
def name(c):
    if c == "floor": return "floor (floor.py process)"
    kind, i = c.split(":"); return f"{kind} {bins[int(i) - 1]}"
out = {}
for c in dict.fromkeys(c for c, _ in rows):
    m = {n: med([x[0] for x in rows[(c, n)]]) for n in ns}
    cc = (med([x[1] for x in rows[(c, hi)]]) - med([x[1] for x in rows[(c, lo)]])) / (hi - lo)
    tc = (med([x[2] for x in rows[(c, hi)]]) - med([x[2] for x in rows[(c, lo)]])) / (hi - lo)
    out[c] = ((m[hi] - m[lo]) / (hi - lo), cc, tc, m)
f = out["floor"]
x = lambda a, b: f"{a / b:.2f}x" if b else "-"
print(f"{'case':44s} " + " ".join(f"N={n} ms" for n in ns) + "  marginal ms (x floor)  CPU/cmd client ms  target ms")
for c, (mg, cc, tc, m) in out.items():
    print(f"{name(c)[:44]:44s} " + " ".join(f"{m[n]:7.1f}" for n in ns)
          + f"  {mg:6.3f} ({x(mg, f[0])})  {cc:6.3f} ({x(cc, f[1])})  {tc:6.3f} ({x(tc, f[2])})")
print(f"{len(rows[('floor', lo)])} rounds; load at the end: {open('/proc/loadavg').read().split()[:3]}")
PY
