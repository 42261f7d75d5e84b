"""Writes bench/RESULTS.md (on stdout) from the raw data bench/run leaves in its work dir:
times.tsv (item, case, n, round, ms, exit), mem.tsv (item, case, n, peakmem.py JSON),
meta.tsv (key, value) and the runbook run records under state/."""
import datetime
import glob
import json
import os
import statistics
import sys
from collections import defaultdict

work = sys.argv[1]

meta, failed = {}, []
for line in open(os.path.join(work, "meta.tsv")):
    k, _, v = line.rstrip("\n").partition("\t")
    if k == "failed":
        failed.append(v)
    else:
        meta[k] = v

times = defaultdict(list)   # (item, case, n) -> [ms] of successful runs, in run order
fails = defaultdict(int)
for line in open(os.path.join(work, "times.tsv")):
    item, case, n, rnd, ms, rc = line.rstrip("\n").split("\t")
    if rc == "0":
        times[(item, case, int(n))].append(float(ms))
    else:
        fails[(item, case, int(n))] += 1

mem = []
for line in open(os.path.join(work, "mem.tsv")):
    item, case, n, js = line.rstrip("\n").split("\t", 3)
    mem.append((item, case, int(n), json.loads(js)))

NS = [int(x) for x in meta["ns"].split()]
FAN = int(meta["fanout"])
DRY = int(meta["dry_steps"])
FILES = int(meta["cache_files"])
HAVE_CLEAR = meta.get("have_cache_clear") == "1"

LABELS = {
    "ssh": {
        "runbook": "runbook: a runbook looping `exec` (read_only); one master, one persistent session (a read-eval loop in one channel)",
        "runbook_channels": "runbook with `RUNBOOK_SESSIONS=off`: one master, a channel per command (the design before sessions)",
        "ssh_S": "loop of `ssh -S` over one ControlMaster (master start and exit included)",
        "fabric": "fabric: one `Connection`, N × `c.run` (paramiko)",
        "pyinfra": "pyinfra: N `server.shell` operations (paramiko)",
        "ansible_raw": "ansible-playbook: N `raw` tasks (pipelining, ControlPersist)",
        "ansible_cmd": "ansible-playbook: N `command` tasks (pipelining, ControlPersist)",
        "ssh_fresh": "loop of fresh `ssh` (a connection per command)",
        "one_ssh": "one `ssh` running all N in one shell (lower bound)",
        "one_ssh_procs": "reference: one `ssh` running `/bin/true` N times in one shell (a process per command, no session)",
        "floor_builtin": "floor: one channel, a minimal read-eval loop, N round trips; each command the shell builtin `true` (no process: how issue 14's prototype was measured)",
        "floor_process": "floor: the same loop and round trips; each command a job of its own (a process group) that execs `/usr/bin/true`, its status and both streams' ends framed",
    },
    "pct": {
        "runbook": "runbook: `target(\"node1\"):pct(200)` looping `exec`; one persistent session inside the container",
        "runbook_channels": "runbook with `RUNBOOK_SESSIONS=off`: a channel and a `pct exec` per command",
        "ssh_S": "loop of `ssh -S … pct exec 200 -- true` over one ControlMaster",
    },
    "fan": {
        "runbook": "runbook: `parallel` (limit 20), cold (new masters)",
        "runbook_warm": "runbook: `parallel` (limit 20), warm: `--keep-connections 10m`, masters kept by the run before",
        "bash_bg": "bash loop of background `ssh` + `wait`",
        "pyinfra": f"pyinfra `--parallel {FAN}` (paramiko)",
        "fabric": "fabric `ThreadingGroup` (paramiko)",
        "ansible_raw": f"ansible-playbook `raw` (forks {FAN})",
        "ansible_cmd": f"ansible-playbook `command` (forks {FAN})",
        "runbook_curve": "evidence: runbook `parallel`, ssh_config `KexAlgorithms curve25519-sha256`",
        "bash_bg_curve": "evidence: background `ssh` loop, `KexAlgorithms curve25519-sha256`",
    },
    "dry": {
        "runbook": f"`runbook run --dry-run`: {DRY} steps, one change each",
        "ansible": f"`ansible-playbook --check`: {DRY} `command: touch …` tasks",
        "pyinfra": f"`pyinfra --dry`: {DRY} `server.shell` operations",
    },
    "start": {
        "runbook": "`runbook --version`",
        "ansible": "`ansible-playbook --version`",
        "pyinfra": "`pyinfra --version`",
        "fab": "`fab --version` (fabric)",
        "true": "`/bin/true` (process start-up floor)",
    },
    "cache": {
        "runbook": "runbook `cache.clear` (local target, declared cache root)",
        "rm": "`rm -rf`",
    },
}
REFERENCE = {"ssh": "one_ssh", "start": "true"}   # floors, not competitors


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    return "—" if x is None else f"{x:,.{nd}f}"


def ratio(x, ref):
    if x is None or not ref:
        return "—"
    return f"{x / ref:.2f}×"


def table(item, n, per_label=None, per_div=None):
    """Rows: label | runs | median (min–max) ms | [per X ms] | vs runbook"""
    cases = [c for c in LABELS[item] if (item, c, n) in times or (item, c, n) in fails]
    rb = med(times.get((item, "runbook", n), []))
    head = "| tool | runs | total ms, median (min–max) |"
    sep = "|---|---|---|"
    if per_label:
        head += f" {per_label} |"
        sep += "---|"
    head += " vs runbook |"
    sep += "---|"
    out = [head, sep]
    for c in sorted(cases, key=lambda c: med(times.get((item, c, n), [])) or 1e18):
        xs = times.get((item, c, n), [])
        m = med(xs)
        runs = f"{len(xs)}" + (f" (+{fails[(item, c, n)]} failed)" if fails[(item, c, n)] else "")
        row = f"| {LABELS[item][c]} | {runs} | {fmt(m)} ({fmt(min(xs) if xs else None)}–{fmt(max(xs) if xs else None)}) |"
        if per_label:
            row += f" {fmt(m / per_div if m is not None else None, 2)} |"
        row += f" {ratio(m, rb)} |"
        out.append(row)
    return out, rb


def records(sub):
    """Run records of the runbook cases (lists of events), in start order, ok runs only."""
    runs = []
    for f in glob.glob(os.path.join(work, "state", sub, "runs", "*.jsonl")):
        evs = [json.loads(l) for l in open(f) if l.strip()]
        if evs and evs[-1].get("event") == "run_finished" and evs[-1].get("outcome") == "ok":
            runs.append(evs)
    return sorted(runs, key=lambda evs: evs[0]["ts"])


def outside(item, n, runs):
    """Process wall minus the record's run duration, paired run by run (same order)."""
    walls = times.get((item, "runbook", n), [])
    if len(walls) != len(runs):
        return None
    return med([w - evs[-1]["duration_ms"] for w, evs in zip(walls, runs)])


lines = []
w = lines.append
w("# Benchmark results: runbook beside ansible, pyinfra, fabric and plain ssh")
w("")
w(f"Generated by `bench/run` on {meta['date']} (do not edit: run it again). "
  f"The whole run took {int(meta['elapsed_s']) // 60} min {int(meta['elapsed_s']) % 60} s."
  + (" **QUICK smoke run: small N, one round; not a measurement.**" if meta.get("quick") == "1" else ""))
w("")
w("## Tools and machine")
w("")
w("| what | version / value |")
w("|---|---|")
for k, label in [("runbook", "runbook"), ("commit", "runbook commit"), ("ansible-core", "ansible-core"),
                 ("pyinfra", "pyinfra"), ("fabric", "fabric"), ("python", "python"),
                 ("openssh", "OpenSSH (client and the bench sshd)"),
                 ("kex_openssh", "key exchange agreed by OpenSSH's client (runbook, ssh, ansible)"),
                 ("kex_paramiko", "key exchange agreed by paramiko (pyinfra, fabric)"), ("nproc", "nproc"), ("cpu", "CPU"),
                 ("memory", "memory"), ("kernel", "kernel"), ("os", "OS"), ("tmpfs", "work dir filesystem (/var/tmp)"),
                 ("load_end", "load average at the end"), ("cpu_pressure_end", "CPU pressure (PSI some avg10/60/300) at the end")]:
    w(f"| {label} | {meta.get(k, '?')} |")
w("")
w("## Method")
w("")
w(f"- Every tool does the same work against sshd instances that `bench/run` starts on 127.0.0.1 "
  f"(one for the per-command work, {FAN} for fan-out), with one throw-away key and a known_hosts "
  "file that every tool checks host keys against.")
w("- A time is the wall time of the whole command (start-up, connect, work, teardown), taken by bash "
  "around it; the tool's output goes to a log file. Interleaved rounds: round r runs every tool once, "
  "in an order rotated each round, before round r+1. Median (min–max) over the runs listed.")
w(f"- Rounds: {meta['rounds']}. Fast tools get ROUNDS; ansible, pyinfra, fabric and fresh-ssh loops "
  "get fewer (SLOW_ROUNDS, and SLOWEST_ROUNDS for ansible `command` and fresh ssh at the larger N), "
  "because one of their runs takes tens of seconds: few rounds, so read their min–max.")
w("- Before timing, a validation pass has every tool run a command that appends a line to a file; "
  "the counts must be exact (N on one host, one per host for fan-out), else the run stops.")
w("- Each timed run starts cold: ControlPersist masters left by ansible and the `ssh -S` loop are "
  "closed after every run (outside the timing); runbook closes its own at the end of a run, except "
  "in the one case marked warm (`--keep-connections`), which uses the masters the run before it kept.")
w("- The machine is shared and was not idle (see the load above): read ratios and orders of "
  "magnitude, not the third digit.")
if failed:
    w("")
    w("**Failures in this run:**")
    w("")
    for f in failed:
        w(f"- {f}")

# ---------------------------------------------------------------- 1
w("")
w("## 1. Trivial remote commands (`true`) on one host")
w("")
w("What runs on the host differs slightly: runbook's session loop (bash there) forks a job in a process "
  "group of its own (job control) that execs `/usr/bin/true`; ansible `command` starts a Python module "
  "that runs `/usr/bin/true`; the ssh loops, fabric, pyinfra and ansible `raw` run the shell builtin. "
  "`/bin/true` costs about 1 ms.")
meds = {}
for n in NS:
    w("")
    w(f"### {n} commands")
    w("")
    t, rb = table("ssh", n, "per command ms", n)
    lines.extend(t)
    low = med(times.get(("ssh", "one_ssh", n), []))
    for c in LABELS["ssh"]:
        meds[(c, n)] = med(times.get(("ssh", c, n), []))
    if rb is not None and low is not None:
        w("")
        w(f"runbook's overhead over the lower bound: {(rb - low) / n:.2f} ms per command.")

if len(NS) >= 2:
    a, b = NS[0], NS[-1]
    w("")
    w(f"### Fixed cost and cost per command (from the {a}- and {b}-command medians)")
    w("")
    w(f"marginal = (median at {b} − median at {a}) / {b - a}; fixed = median at {a} − {a} × marginal "
      "(start-up, connect, teardown). Read with the min–max above: a noisy median moves both.")
    w("")
    w("| tool | fixed ms | marginal ms per command | marginal vs runbook |")
    w("|---|---|---|---|")
    rbm = None
    if meds.get(("runbook", a)) is not None and meds.get(("runbook", b)) is not None:
        rbm = (meds[("runbook", b)] - meds[("runbook", a)]) / (b - a)
    rows = []
    for c in LABELS["ssh"]:
        x, y = meds.get((c, a)), meds.get((c, b))
        if x is None or y is None:
            continue
        mg = (y - x) / (b - a)
        rows.append((mg, c, x - a * mg))
    for mg, c, fixed in sorted(rows):
        w(f"| {LABELS['ssh'][c]} | {fixed:,.0f} | {mg:.2f} | {ratio(mg, rbm)} |")

# runbook's own record: where its time goes
def ts_ms(e):
    return datetime.datetime.fromisoformat(e["ts"].replace("Z", "+00:00")).timestamp() * 1000


rb_rows = []
for n in NS:
    runs = records(f"loop-{n}")
    if not runs:
        continue
    first, inside, gaps, durs = [], [], [], []
    for evs in runs:
        st = [e for e in evs if e.get("event") == "action_started"]
        fi = [e for e in evs if e.get("event") == "action_finished"]
        first.append(fi[0]["duration_ms"])
        # From the event timestamps (ms resolution; averaged over N-1 commands):
        inside.append(statistics.mean(ts_ms(f) - ts_ms(s_) for s_, f in zip(st[1:], fi[1:])))
        gaps.append(statistics.mean(ts_ms(st[i + 1]) - ts_ms(fi[i]) for i in range(len(st) - 1)))
        durs.append(evs[-1]["duration_ms"])
    rb_rows.append((n, len(runs), med(first), med(inside), med(gaps), med(durs), meds.get(("runbook", n)),
                    outside("ssh", n, runs)))
RB_FIRST = {r[0]: r[2] for r in rb_rows}
RB_INSIDE = {r[0]: r[3] for r in rb_rows}
RB_GAP = {r[0]: r[4] for r in rb_rows}
if rb_rows:
    w("")
    w("### Where runbook's time goes (its own run records of the timed runs above)")
    w("")
    w("| N | runs | first command (waits for the connection) ms | each later command: request to exit status, mean ms | runbook's own time between two commands (Lua, events, record), mean ms | run (record) ms | process wall ms | outside the run (start-up, load and check, closing the master) ms |")
    w("|---|---|---|---|---|---|---|---|")
    for n, k, f, ins, gap, d, wall, out in rb_rows:
        w(f"| {n} | {k} | {fmt(f)} | {fmt(ins, 2)} | {fmt(gap, 3)} | {fmt(d)} | {fmt(wall)} | {fmt(out)} |")
    w("")
    w("Medians over the runs; the means inside a run come from the events' timestamps, which are whole milliseconds: a mean gap under ~0.05 ms means too small to see.")

# ---------------------------------------------------------------- 1b
PCT_MEDS = {}
if any(i == "pct" for (i, c, n) in times):
    w("")
    w("## 1b. Trivial commands in a container on that host (`pct exec`, the test double)")
    w("")
    w("The `pct` double (tests/bin/pct) does what Proxmox's `pct exec` does for a command: it enters a "
      "mount namespace of the container's (`unshare --mount`, two bind mounts) and `exec`s the command. "
      "runbook's session does that once and runs every command in the loop inside.")
    for n in NS:
        if not any((i, n) == ("pct", nn) for (i, c, nn) in times):
            continue
        w("")
        w(f"### {n} commands")
        w("")
        t, _ = table("pct", n, "per command ms", n)
        lines.extend(t)
        for c in LABELS["pct"]:
            PCT_MEDS[(c, n)] = med(times.get(("pct", c, n), []))


def marginal(get, a, b):
    x, y = get(a), get(b)
    return None if x is None or y is None else (y - x) / (b - a)


if len(NS) >= 2:
    a, b = NS[0], NS[-1]
    w("")
    w("## Goals of issue 14 (persistent sessions), from the tables above")
    w("")
    w(f"Per command = the marginal cost between the {a}- and {b}-command medians (connect and start-up "
      f"excluded), and, from runbook's records, the mean time from a command's request to its exit status. "
      "Measured on this shared 2-core machine, not a calm one: compare the ratios within the run.")
    w("")
    w("| goal | measured | met here |")
    w("|---|---|---|")
    rbm = marginal(lambda n: meds.get(("runbook", n)), a, b)
    rin = RB_INSIDE.get(b)
    def row(goal, text, ok):
        w(f"| {goal} | {text} | {'yes' if ok else 'no'} |")
    if rbm is not None:
        row("≤ 1.0 ms per trivial command (calm machine)",
            f"{rbm:.2f} ms marginal; {fmt(rin, 2)} ms request to exit status (records)", rbm <= 1.0)
    for c, goal in (("ssh_S", 4), ("pyinfra", 25), ("ansible_raw", 30)):
        o = marginal(lambda n: meds.get((c, n)), a, b)
        if rbm and o:
            row(f"≥ {goal}× faster than {LABELS['ssh'][c].split(':')[0]}",
                f"{o / rbm:.1f}× marginal ({o:.2f} vs {rbm:.2f} ms); {meds[(c, b)] / meds[('runbook', b)]:.1f}× total at N={b}",
                o / rbm >= goal)
    fl = marginal(lambda n: meds.get(("one_ssh_procs", n)), a, b)
    if rbm and fl:
        w(f"| (reference) this machine's floor for a process per command: one shell running `/bin/true` N times | "
          f"{fl:.2f} ms marginal; runbook spends {rbm - fl:.2f} ms per command above it | — |")
    fb = marginal(lambda n: meds.get(("floor_builtin", n)), a, b)
    fp = marginal(lambda n: meds.get(("floor_process", n)), a, b)
    if rbm and fb and fp:
        w(f"| (reference) the floor of a session, one round trip per command over one channel (`bench/lib/floor.py`) | "
          f"{fp:.2f} ms marginal with a process group per command (item 1 requires one), {fb:.2f} ms running the builtin "
          f"(no process); runbook spends {rbm - fp:.2f} ms per command above the first | — |")
    ch = marginal(lambda n: meds.get(("runbook_channels", n)), a, b)
    if rbm and ch:
        w(f"| (reference) sessions against a channel per command, same run | {ch / rbm:.1f}× ({ch:.2f} vs {rbm:.2f} ms marginal) | — |")
    pm = marginal(lambda n: PCT_MEDS.get(("runbook", n)), a, b)
    if pm is not None:
        pch = marginal(lambda n: PCT_MEDS.get(("runbook_channels", n)), a, b)
        extra = f"; {pch / pm:.1f}× faster than a `pct exec` per command ({pch:.2f} ms)" if pch else ""
        row("≤ 1.5 ms per command through pct", f"{pm:.2f} ms marginal{extra}", pm <= 1.5)
    cold = med(times.get(("fan", "runbook", FAN), []))
    warm = med(times.get(("fan", "runbook_warm", FAN), []))
    bg = med(times.get(("fan", "bash_bg", FAN), []))
    if cold and bg:
        row(f"fan-out to {FAN} fresh hosts no slower than a bash loop of `ssh … &`",
            f"runbook {cold:,.0f} ms, bash loop {bg:,.0f} ms ({cold / bg:.2f}×)", cold <= bg * 1.05)
    if cold and warm:
        w(f"| fan-out to {FAN} hosts, cold and warm (`--keep-connections`) | cold {cold:,.0f} ms, warm {warm:,.0f} ms ({cold / warm:.1f}× faster warm) | — |")

# ---------------------------------------------------------------- 2
w("")
w(f"## 2. Fan-out: one `true` on {FAN} hosts (a fresh connection to each; runbook warm: kept masters)")
w("")
t, rb_fan = table("fan", FAN, "per host ms", FAN)
lines.extend(t)
FAN_BREAK = {}
for sub, case in (("fan", "runbook"), ("fan-curve", "runbook_curve")):
    runs = records(sub)
    if not runs:
        continue
    per_host, step_d = [], []
    for evs in runs:
        per_host.extend(e["duration_ms"] for e in evs if e.get("event") == "action_finished")
        step_d.append(evs[-1]["duration_ms"])
    FAN_BREAK[case] = (len(runs), min(per_host), med(per_host), max(per_host), med(step_d), outside("fan", FAN, runs) if case == "runbook" else None)
if "runbook" in FAN_BREAK:
    k, lo, md, hi, st, out = FAN_BREAK["runbook"]
    w("")
    w(f"runbook's records ({k} runs): one host's command, connect included, took {fmt(lo)}–{fmt(hi)} ms "
      f"(median {fmt(md)}); the `parallel` step {fmt(st)} ms (median); outside the run (start-up, "
      f"closing {FAN} masters) {fmt(out)} ms.")
    if "runbook_curve" in FAN_BREAK:
        k, lo, md, hi, st, _ = FAN_BREAK["runbook_curve"]
        w(f"With `KexAlgorithms curve25519-sha256`: {fmt(lo)}–{fmt(hi)} ms per host (median {fmt(md)}), "
          f"step {fmt(st)} ms.")

# ---------------------------------------------------------------- 3
w("")
w(f"## 3. Dry-run: {DRY} steps against one host")
w("")
w("Each step or task is one change (`touch /tmp/rb-bench-dry-PID/fI`); nothing is created "
  "(checked). runbook plans changes without contacting the host (a dry-run runs only `read_only` "
  "commands, and there are none here). ansible `--check` connects and still sends every `command` "
  "task's module to the host, which answers `skipping` (a command's effect cannot be predicted): "
  "a checked task costs what a real one does (item 1). pyinfra `--dry` connects and prepares the "
  "operations without running them.")
w("")
t, _ = table("dry", DRY, "per step ms", DRY)
lines.extend(t)

# ---------------------------------------------------------------- 4
w("")
w("## 4. Start-up")
w("")
t, _ = table("start", 1)
lines.extend(t)

# ---------------------------------------------------------------- 5
w("")
w(f"## 5. Clearing a cache of {FILES:,} small files")
w("")
w(f"A tree of {FILES:,} files of 16 bytes, 1,000 per directory, in the work dir under /var/tmp ({meta.get('tmpfs', '?')}); "
  "recreated before every run and `sync`ed, outside the timing.")
w("")
t, _ = table("cache", FILES)
lines.extend(t)
if not HAVE_CLEAR:
    w("| runbook `cache.clear` | — | **pending**: not in this build (`runbook docs cache` lists no `cache.clear`); bench/run measures it as soon as it lands | — |")
CACHE_BREAK = None
runs = records("cache")
if runs:
    look, rm, outs = [], [], []
    for evs in runs:
        acts = {e["action"]: e for e in evs if e.get("event") == "action_started"}
        for e in evs:
            if e.get("event") == "action_finished":
                (rm if acts[e["action"]]["effect"] == "change" else look).append(e["duration_ms"])
    CACHE_BREAK = (len(runs), med(look), med(rm), outside("cache", FILES, runs), rm)
    w("")
    w("`cache.clear` is two actions on the target (its run records): a read that resolves the path, "
      "checks it against the cache roots, sizes it (bytes, files) and looks for processes using it, "
      "then the deletion, `rm -rf -- PATH`.")
    w("")
    w("| part | median ms |")
    w("|---|---|")
    w(f"| look (resolve, check, size, processes using it) | {fmt(CACHE_BREAK[1])} |")
    w(f"| `rm -rf` inside runbook | {fmt(CACHE_BREAK[2])} |")
    w(f"| outside the run (start-up, lock, record) | {fmt(CACHE_BREAK[3])} |")
    w(f"| bare `rm -rf` (table above) | {fmt(med(times.get(('cache', 'rm', FILES), [])))} |")

# ---------------------------------------------------------------- 6
w("")
w("## 6. Peak memory (work items 1 and 2)")
w("")
w("One run per tool, sampled by `bench/lib/peakmem.py` (not timed; the sampler costs CPU). "
  f"Item 1 at N = {NS[0]}. What is measured:")
w("")
w("- **tree PSS** / **tree RSS**: the sampler makes itself a child subreaper, so daemonised "
  "descendants (ssh `-f` masters, ControlPersist masters) stay in its tree; every 5 ms it walks the "
  "tree and sums `Pss` and `Rss` from `/proc/PID/smaps_rollup` over every live process; the column is "
  "the largest sum seen. PSS splits shared pages between the processes mapping them (the honest total); "
  "the RSS sum counts shared libraries once per process (an upper bound). A process living under "
  "5 ms can be missed.")
w("- **ru_maxrss**: what `/usr/bin/time -f %M` prints. GNU time takes `ru_maxrss` from `wait4()` on "
  "the command; Linux fills it with the maximum of the process's own peak and `cmaxrss`, the largest "
  "peak of any descendant it *waited for*. It is the peak of the single largest process, not a sum "
  "over processes alive together (ansible's forks, parallel ssh clients), and a daemonised process "
  "(never waited for by the command) is not in it at all.")
w("- Only this machine's side: the sshd processes serving the sessions are not counted.")
w("")
w("| work | tool | tree PSS MiB | tree RSS MiB | processes at once | PSS at the peak by process name, MiB | ru_maxrss (time -f %M) MiB | still running 0.5 s after the exit (then killed) |")
w("|---|---|---|---|---|---|---|---|")


def by_comm(js):
    by = sorted(((k, v) for k, v in js.get("peak_pss_by_comm_kib", {}).items() if v > 0), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v / 1024:.1f}" for k, v in by[:4]) or "—"


for item, case, n, js in sorted(mem, key=lambda m: (m[0] != "ssh", m[3]["peak_pss_kib"])):
    what = f"{n} commands, one host" if item == "ssh" else f"fan-out, {n} hosts"
    bad = "" if js["exit"] == 0 else f" (exit {js['exit']})"
    w(f"| {what} | {LABELS[item][case]}{bad} | {js['peak_pss_kib'] / 1024:.1f} | {js['peak_rss_kib'] / 1024:.1f} | "
      f"{js['peak_procs']} | {by_comm(js)} | {js['ru_maxrss_kib'] / 1024:.1f} | {js['leftover']} |")

# ---------------------------------------------------------------- not ahead
FLOORS = {("ssh", "one_ssh"), ("ssh", "one_ssh_procs"), ("ssh", "floor_builtin"), ("ssh", "floor_process"), ("start", "true")}
EVIDENCE = {("fan", "runbook_curve"), ("fan", "bash_bg_curve"), ("fan", "runbook_warm"), ("ssh", "runbook_channels"), ("pct", "runbook_channels")}
w("")
w("## Where runbook is not ahead")
w("")
behind, floors = [], []
for item in ("ssh", "pct", "fan", "dry", "start", "cache"):
    for n in sorted({n for (i, c, n) in times if i == item}):
        rb = med(times.get((item, "runbook", n), []))
        if rb is None:
            continue
        for c in LABELS[item]:
            if c == "runbook" or (item, c) in EVIDENCE:
                continue
            m = med(times.get((item, c, n), []))
            if m is not None and m < rb:
                (floors if (item, c) in FLOORS else behind).append((item, n, c, m, rb))
if not behind:
    w("Against the other tools: nowhere in this run; runbook's median is the lowest of the "
      "competing tools in every table.")
else:
    w("Competing rows whose median is below runbook's:")
    w("")
    for item, n, c, m, rb in behind:
        w(f"- {item}, N={n}: {LABELS[item][c]}: {m:,.1f} ms vs runbook {rb:,.1f} ms ({m / rb:.2f}×)")
mem_behind = []
for item in ("ssh", "fan"):
    rbm = next((js for i, c, n, js in mem if i == item and c == "runbook"), None)
    if rbm is None:
        continue
    for i, c, n, js in mem:
        if i == item and c != "runbook" and (i, c) not in FLOORS and js["peak_pss_kib"] < rbm["peak_pss_kib"]:
            mem_behind.append((item, n, c, js, rbm))
if mem_behind:
    w("")
    w("Peak memory (tree PSS, item 6) below runbook's:")
    w("")
    for item, n, c, js, rbm in mem_behind:
        w(f"- {item}, N={n}: {LABELS[item][c]}: {js['peak_pss_kib'] / 1024:.1f} MiB vs runbook "
          f"{rbm['peak_pss_kib'] / 1024:.1f} MiB")
if floors:
    w("")
    w("Floors below runbook (expected; they do less than any tool can):")
    w("")
    for item, n, c, m, rb in floors:
        w(f"- {item}, N={n}: {LABELS[item][c]}: {m:,.1f} ms vs runbook {rb:,.1f} ms ({m / rb:.2f}×)")

why = []
kinds = {(i, c) for i, n, c, m, rb in behind + floors}
if ("ssh", "one_ssh") in kinds or ("ssh", "one_ssh_procs") in kinds:
    n = NS[-1]
    rb, low, procs = meds.get(("runbook", n)), meds.get(("one_ssh", n)), meds.get(("one_ssh_procs", n))
    txt = (f"**One shell running every command (item 1).** It opens one session for all {n} commands, "
           "as runbook's session does; per command runbook's loop then forks a job (a process group of "
           "its own, bash's job control), reports the group, waits for the command's exit status and "
           "frames its stdout and stderr, and runbook waits for that answer before the next command "
           "(a round trip over the channel), where the floor runs a builtin with no result per command. "
           "That is the price of a result (exit code, stdout, stderr, timeout, kill) per command. ")
    if rb is not None and low is not None and procs is not None:
        txt += (f"At N={n}: runbook {rb / n:.2f} ms per command, one shell running `/bin/true` "
                f"{procs / n:.2f} ms (a process each, no session), one shell running the builtin "
                f"{low / n:.2f} ms. ")
    if RB_INSIDE.get(n) is not None:
        txt += (f"runbook's records put a later command at {RB_INSIDE[n]:.2f} ms from its request "
                f"to exit status, and runbook's own work between two commands (Lua, two events, the "
                f"record write) at {RB_GAP[n]:.3f} ms: the per-command cost is the processes on the "
                f"host, not runbook. The first command, which waits for the connection, takes "
                f"{RB_FIRST[n]:,.0f} ms: in a run of {n} commands the connection is "
                f"{RB_FIRST[n] / rb * 100:.0f}% of the wall time.")
    why.append(txt)
if any(i == "fan" for i, c in kinds):
    rb = med(times.get(("fan", "runbook", FAN), []))
    curve = med(times.get(("fan", "runbook_curve", FAN), []))
    bg = med(times.get(("fan", "bash_bg", FAN), []))
    bgc = med(times.get(("fan", "bash_bg_curve", FAN), []))
    txt = (f"**Fan-out (item 2).** All {FAN} connections are new, and on {meta['nproc']} cores their "
           f"key exchanges are CPU work done at once, client and server side. OpenSSH's client "
           f"(runbook, `ssh`, ansible) agrees on `{meta.get('kex_openssh', '?')}` with this sshd by "
           f"default; paramiko (pyinfra, fabric) has no post-quantum key exchange and agrees on "
           f"`{meta.get('kex_paramiko', '?')}`, which costs less CPU. ")
    if None not in (rb, curve, bg, bgc):
        txt += (f"Forcing `KexAlgorithms curve25519-sha256` in the ssh_config (the evidence rows) takes "
                f"runbook from {rb:,.0f} to {curve:,.0f} ms and the background-ssh loop from {bg:,.0f} "
                f"to {bgc:,.0f} ms. ")
    fab, pyi = med(times.get(("fan", "fabric", FAN), [])), med(times.get(("fan", "pyinfra", FAN), []))
    if curve is not None and fab is not None and pyi is not None:
        txt += (f"With the same kind of key exchange as paramiko, runbook ({curve:,.0f} ms) is "
                f"{'ahead of' if curve < min(fab, pyi) else 'level with or behind'} fabric ({fab:,.0f} ms) "
                f"and pyinfra ({pyi:,.0f} ms). ")
    if "runbook" in FAN_BREAK:
        k, lo, md, hi, st, out = FAN_BREAK["runbook"]
        txt += (f"runbook's own share is small: its records put the `parallel` step at {st:,.0f} ms of "
                f"the {rb:,.0f} ms process wall ({out:,.0f} ms outside the run: start-up and closing "
                f"the masters), and the step is the {FAN} `ssh` master processes connecting "
                f"({lo:,.0f}–{hi:,.0f} ms per host), as in the bash loop.")
    why.append(txt)
if any(i == "cache" for i, c in kinds) and CACHE_BREAK:
    k, look, rm, out, rm_runs = CACHE_BREAK
    bare = med(times.get(("cache", "rm", FILES), []))
    rbc = med(times.get(("cache", "runbook", FILES), []))
    per_round = ", ".join(f"{t:,.0f} ({r:,})" for t, r in zip(times.get(("cache", "runbook", FILES), []), rm_runs))
    bare_rounds = ", ".join(f"{t:,.0f}" for t in times.get(("cache", "rm", FILES), []))
    why.append(f"**Cache clear (item 5).** `cache.clear` is `rm -rf` plus the checks that make it safe to "
               f"hand to an operator: its records put the look (resolve, check against the cache roots, "
               f"count bytes and files, find processes using the tree) at {fmt(look)} ms "
               f"({look / rbc * 100:.0f}% of the clear) and its own `rm -rf` at {fmt(rm)} ms, against "
               f"{fmt(bare)} ms for the bare `rm -rf`; {fmt(out)} ms are outside the run. The look walks "
               f"all {FILES:,} entries once before the deletion walks them again; the deletion itself is "
               "the same program. Run by run, `cache.clear` took "
               f"{per_round} ms, its own `rm -rf` in brackets, and the bare `rm -rf` {bare_rounds} ms: "
               "beyond the look, a gap is the deletion itself running slower on this shared disk, not runbook.")
if mem_behind:
    parts = []
    for item, n, c, js, rbm in mem_behind:
        rb_by = rbm.get("peak_pss_by_comm_kib", {})
        own = rb_by.get("runbook", 0) / 1024
        rest = (rbm["peak_pss_kib"] / 1024) - own
        parts.append(f"{item} vs {LABELS[item][c].split(':')[0]}: runbook's own process {own:.1f} MiB and its "
                     f"ssh master(s) {rest:.1f} MiB, against {js['peak_pss_kib'] / 1024:.1f} MiB "
                     f"({by_comm(js)})")
    why.append("**Peak memory (item 6).** runbook drives OpenSSH: one `ssh` master per host, like the "
               "plain ssh approaches, plus its own process (Lua VM, runtime, event sinks). Where a "
               "plain-ssh approach peaks lower, the difference is runbook's own process; from the "
               "per-process split at the peak: " + "; ".join(parts) + ".")
explained = {"fan", "cache"}   # the texts above; floors are explained by the first one
if any(i not in explained for i, n, c, m, rb in behind):
    why.append("Other rows where runbook is behind have no automatic breakdown here: see the tables "
               "and the logs of the last run of each case in /tmp/runbook-bench-logs.")
if why:
    w("")
    w("### Why")
    for t in why:
        w("")
        w(t)
print("\n".join(lines))
