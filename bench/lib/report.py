"""Writes bench/RESULTS.md (on stdout) from the raw data bench/run leaves in its work dir:
times.tsv (item, case, n, round, ms, exit), mem.tsv (item, case, n, peakmem.py JSON),
meta.tsv (key, value), sections.tsv (section, seconds), artifact.tsv (bench/artifact.sh's
raw times), scale-print-*.txt (what runbook printed at scale) and the runbook run records
under state/. A section whose data is absent (bench/run's ONLY) is left out. The
e2e-torch figures, which bench/run cannot make, are bench/e2e-torch.md, included verbatim."""
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
WALL_BY_ROUND = {}          # (item, case, n, round) -> ms
for line in open(os.path.join(work, "times.tsv")):
    item, case, n, rnd, ms, rc = line.rstrip("\n").split("\t")
    if rc == "0":
        times[(item, case, int(n))].append(float(ms))
        WALL_BY_ROUND[(item, case, int(n), rnd)] = float(ms)
    else:
        fails[(item, case, int(n))] += 1

mem, masters = [], {}   # masters: case -> {"pids", "pss_kib": [...], "rss_kib": [...]} (idle ssh masters)
for line in open(os.path.join(work, "mem.tsv")):
    item, case, n, js = line.rstrip("\n").split("\t", 3)
    if item == "masters":
        masters[case] = json.loads(js)
    else:
        mem.append((item, case, int(n), json.loads(js)))


def read_tsv(name):
    path = os.path.join(work, name)
    return [l.rstrip("\n").split("\t") for l in open(path)] if os.path.exists(path) else []


SECTION_S = defaultdict(float)
for sec, secs in read_tsv("sections.tsv"):
    SECTION_S[sec] += float(secs)
ONLY = meta.get("only", "").split()

NS = [int(x) for x in meta["ns"].split()]
SCALE = [int(x) for x in meta.get("scale_sizes", "").split()]
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
    "fan1": {
        "runbook": "runbook: the same runbook on one host, cold",
        "runbook_warm": "runbook: the same runbook on one host, warm (its master kept)",
    },
    "load": {
        "version": "`runbook --version`",
        "check30": "`runbook check`, 30 steps",
        "check1000": "`runbook check`, 1,000 steps",
        "dry": f"`runbook run --dry-run`, {DRY} steps (one change each, against node1: not contacted)",
        "true": "`/bin/true` (process start-up floor)",
    },
    "scale": {
        "runbook": "runbook `parallel` (all at once), cold: a new master per host",
        "bash_bg": "bash loop of background `ssh` + `wait`, cold",
        "runbook_warm": "runbook, warm: `--keep-connections`, masters kept",
        "bash_bg_warm": "bash loop of background `ssh -S` over kept ControlPersist masters",
    },
    "clean": {
        "local": "local, first recovery (compiles, captures)",
        "local_again": "local, again (restores the captured cache)",
        "pct": "ssh + pct, first recovery (compiles, captures)",
        "pct_again": "ssh + pct, again (restores the captured cache)",
    },
}
LABELS["pct"]["floor_process"] = ("floor: `bench/lib/floor.py` process mode run inside the container "
                                  "(`pct exec 200 -- bash` once, the same loop and round trips)")
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
GOALS_AT = len(lines)   # the goals table of issue 32 goes here once every section is measured
GOALS = []              # (item, what, measured, goal, met: True/False/None)


def add_goal(item, what, measured, goal_text, met):
    GOALS.append((item, what, measured, goal_text, met))


def has(item):
    return any(i == item for (i, c, n) in times) or any(i == item for (i, c, n) in fails)


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
w("")
w("Sections run (`ONLY`, bench/run's header says what each is) and how long each took, its "
  "validation and memory runs included:")
w("")
w("| section | s |")
w("|---|---|")
for sec in meta.get("all_sections", "").split():
    if sec in ONLY:
        w(f"| {sec} | {SECTION_S.get(sec, 0):,.0f} |")
    else:
        w(f"| {sec} | not run |")
if failed:
    w("")
    w("**Failures in this run:**")
    w("")
    for f in failed:
        w(f"- {f}")

# ---------------------------------------------------------------- 1
MARK = len(lines)
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

if not has("ssh"):
    del lines[MARK:]

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


FLOOR_ROWS = []   # (where, runbook marginal, floor marginal)
if len(NS) >= 2:
    for where, get in (("ssh", lambda c, n: meds.get((c, n))), ("pct", lambda c, n: PCT_MEDS.get((c, n)))):
        rbm_ = marginal(lambda n: get("runbook", n), NS[0], NS[-1])
        flm_ = marginal(lambda n: get("floor_process", n), NS[0], NS[-1])
        if rbm_ is not None and flm_:
            FLOOR_ROWS.append((where, rbm_, flm_))
if FLOOR_ROWS:
    a, b = NS[0], NS[-1]
    w("")
    w("## Issue 32 item 1: runbook against the floor of a session, per command")
    w("")
    w(f"Marginal cost per command (between the {a}- and {b}-command medians: start-up and connect "
      "excluded) of runbook's persistent session against `bench/lib/floor.py` in process mode: one "
      "channel, a minimal read-eval loop, each command a job of its own (a process group) that execs "
      "`/usr/bin/true`, status and both streams' ends framed, one round trip per command: what a "
      "command costs through one channel before any of runbook's own work. Through pct the floor's "
      "loop runs inside the container (`pct exec 200 -- bash`, once), as runbook's session does.")
    w("")
    w("| where | runbook marginal ms | floor marginal ms | runbook / floor | goal |")
    w("|---|---|---|---|---|")
    for where, rbm_, flm_ in FLOOR_ROWS:
        w(f"| {where} | {rbm_:.2f} | {flm_:.2f} | {rbm_ / flm_:.2f}× | ≤ 1.15× |")
        add_goal("1", f"per command over {where}: runbook / floor of a session (process mode), marginal",
             f"{rbm_ / flm_:.2f}× ({rbm_:.2f} vs {flm_:.2f} ms)", "≤ 1.15×", rbm_ / flm_ <= 1.15)

if len(NS) >= 2 and has("ssh"):
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
MARK = len(lines)
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

WARM1 = med(times.get(("fan1", "runbook_warm", 1), []))
COLD1 = med(times.get(("fan1", "runbook", 1), []))
warm20 = med(times.get(("fan", "runbook_warm", FAN), []))
cold20 = med(times.get(("fan", "runbook", FAN), []))
if WARM1 is not None:
    w("")
    w(f"### One host against {FAN} (issue 32 item 3)")
    w("")
    w("The same runbook on node2 alone, in the same interleaved rounds: what one host costs, and "
      f"what the {FAN - 1} others add.")
    w("")
    t, _ = table("fan1", 1)
    lines.extend(t)
    w("")
    if warm20 is not None:
        w(f"Warm: {FAN} hosts {warm20:,.1f} ms against one host {WARM1:,.1f} ms: {warm20 / WARM1:.2f}×; "
          f"each host beyond the first adds {(warm20 - WARM1) / (FAN - 1):.2f} ms.")
        add_goal("3", f"fan-out warm: {FAN} hosts / one host (`--keep-connections`)",
             f"{warm20 / WARM1:.2f}× ({warm20:,.0f} vs {WARM1:,.0f} ms; {(warm20 - WARM1) / (FAN - 1):.1f} ms per extra host)",
             "≤ 1.5×", warm20 / WARM1 <= 1.5)
    if cold20 is not None and COLD1 is not None:
        w(f"Cold: {FAN} hosts {cold20:,.1f} ms against one host {COLD1:,.1f} ms: {cold20 / COLD1:.2f}×; "
          f"each host beyond the first adds {(cold20 - COLD1) / (FAN - 1):.1f} ms (its key exchange, "
          f"on {meta.get('nproc', '?')} cores).")
    runs1 = records("fan-warm-one")
    if runs1:
        acts = [e["duration_ms"] for evs in runs1 for e in evs if e.get("event") == "action_finished"]
        durs = [evs[-1]["duration_ms"] for evs in runs1]
        w(f"One host warm, from its records ({len(runs1)} runs): the command {fmt(med(acts))} ms "
          f"(median), the run {fmt(med(durs))} ms; the rest of the {WARM1:,.1f} ms is start-up, "
          "loading the runbook and the record.")
if not has("fan"):
    del lines[MARK:]

# ---------------------------------------------------------------- 3
MARK = len(lines)
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
if not has("dry"):
    del lines[MARK:]

# ---------------------------------------------------------------- 4
if has("start"):
    w("")
    w("## 4. Start-up")
    w("")
    t, _ = table("start", 1)
    lines.extend(t)

# ---------------------------------------------------------------- 5
MARK = len(lines)
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

if not has("cache"):
    del lines[MARK:]

# ---------------------------------------------------------------- 6
MARK = len(lines)
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


MEM6 = [m for m in mem if m[0] in ("ssh", "fan", "fan1")]
for item, case, n, js in sorted(MEM6, key=lambda m: (m[0] != "ssh", m[3]["peak_pss_kib"])):
    what = f"{n} commands, one host" if item == "ssh" else f"fan-out, {n} host{'s' if n > 1 else ''}"
    bad = "" if js["exit"] == 0 else f" (exit {js['exit']})"
    w(f"| {what} | {LABELS[item][case]}{bad} | {js['peak_pss_kib'] / 1024:.1f} | {js['peak_rss_kib'] / 1024:.1f} | "
      f"{js['peak_procs']} | {by_comm(js)} | {js['ru_maxrss_kib'] / 1024:.1f} | {js['leftover']} |")


def mem_of(item, case, n=None):
    return next((js for i, c, nn, js in mem if i == item and c == case and (n is None or nn == n)), None)


def idle_masters(case):
    m = masters.get(case)
    pss = [x for x in (m or {}).get("pss_kib", []) if x > 0]
    return (len(pss), statistics.median(pss), min(pss), max(pss)) if pss else None


fan20, fan1 = mem_of("fan", "runbook", FAN), mem_of("fan1", "runbook", 1)
idle = idle_masters("kept_idle")
if fan20 or idle:
    w("")
    w(f"### Memory of {FAN} hosts with sessions, and of one ssh master (issue 32 item 4)")
    w("")
if fan20:
    own = fan20.get("peak_pss_by_comm_kib", {}).get("runbook", 0) / 1024
    sshs = fan20.get("peak_pss_by_comm_kib", {}).get("ssh", 0) / 1024
    w(f"- The whole tree of a cold run on {FAN} hosts (runbook, its {FAN} ssh masters, each holding "
      f"the run's session): {fan20['peak_pss_kib'] / 1024:.1f} MiB PSS at its peak (runbook "
      f"{own:.1f}, ssh {sshs:.1f}).")
    add_goal("4", f"memory of the whole tree, {FAN} hosts with sessions (cold run: runbook and its masters), PSS",
         f"{fan20['peak_pss_kib'] / 1024:.1f} MiB (runbook {own:.1f}, ssh masters {sshs:.1f})", "≤ 30 MiB",
         fan20["peak_pss_kib"] / 1024 <= 30)
    if fan1:
        inc = (fan20["peak_pss_kib"] - fan1["peak_pss_kib"]) / 1024 / (FAN - 1)
        w(f"- The same runbook on one host: {fan1['peak_pss_kib'] / 1024:.1f} MiB; each host beyond the "
          f"first adds {inc:.2f} MiB (from the 1- and {FAN}-host runs).")
if idle:
    k, md, lo, hi = idle
    w(f"- One ssh master alone, idle, as `--keep-connections` leaves it (sampled once, {k} masters): "
      f"{md / 1024:.2f} MiB PSS (median; {lo / 1024:.2f}–{hi / 1024:.2f}), "
      f"RSS {statistics.median(masters['kept_idle']['rss_kib']) / 1024:.2f} MiB (libraries shared with "
      "the other masters counted whole).")
if not MEM6:
    del lines[MARK:]

# ---------------------------------------------------------------- not ahead
FLOORS = {("ssh", "one_ssh"), ("ssh", "one_ssh_procs"), ("ssh", "floor_builtin"), ("ssh", "floor_process"), ("start", "true"),
          ("pct", "floor_process")}
EVIDENCE = {("fan", "runbook_curve"), ("fan", "bash_bg_curve"), ("fan", "runbook_warm"), ("ssh", "runbook_channels"), ("pct", "runbook_channels")}
w("")
MARK = len(lines)
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
        if i == item and c != "runbook" and (i, c) not in FLOORS | EVIDENCE and js["peak_pss_kib"] < rbm["peak_pss_kib"]:
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
if not any(has(i) for i in ("ssh", "pct", "fan", "dry", "start", "cache")):
    del lines[MARK:]


def union_ms(spans):
    """Total length of the union of [start, end] spans (ms): parallel commands counted once."""
    tot, cur_s, cur_e = 0.0, None, None
    for a, b in sorted(spans):
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


# ---------------------------------------------------------------- 7. loading a runbook
if has("load"):
    w("")
    w("## 7. Loading and checking a runbook (issue 32 item 2)")
    w("")
    w(f"Interleaved rounds of each command alone (no ssh: the dry-run plans without contacting its "
      f"host). The runbooks are bench/lib/steps.sh's (each step one `touch` on the local target, as "
      f"bench/engine.sh's) and the {DRY}-step dry-run of item 3. Peak RSS is the process's own "
      "high-water mark (`ru_maxrss` from `wait4`, what `/usr/bin/time -f %M` prints; these commands "
      "start no child), the median of 3 runs under `bench/lib/peakmem.py`; PSS is that sampler's peak.")
    w("")
    w("| what | runs | median ms (min–max) | peak RSS MB (ru_maxrss) | peak PSS MiB |")
    w("|---|---|---|---|---|")
    LOAD, LOAD_RSS = {}, {}
    for c in LABELS["load"]:
        xs = times.get(("load", c, 0), [])
        if not xs:
            continue
        LOAD[c] = med(xs)
        js = [m for i, cc, n, m in mem if i == "load" and cc == c]
        rss = med([m["ru_maxrss_kib"] for m in js]) if js else None
        pss = med([m["peak_pss_kib"] for m in js]) if js else None
        LOAD_RSS[c] = rss
        w(f"| {LABELS['load'][c]} | {len(xs)} | {fmt(LOAD[c], 2)} ({fmt(min(xs), 2)}–{fmt(max(xs), 2)}) | "
          f"{fmt(rss * 1024 / 1e6 if rss else None, 1)} | {fmt(pss / 1024 if pss else None, 1)} |")
    w("")
    w("| goal of item 2 | measured | goal | met here |")
    w("|---|---|---|---|")

    def lgoal(what, measured, text, ok):
        w(f"| {what} | {measured} | {text} | {'yes' if ok else 'no'} |")
        add_goal("2", what, measured, text, ok)

    v, c30, c1k, dr = (LOAD.get(k) for k in ("version", "check30", "check1000", "dry"))
    if c30 and c1k:
        lgoal("`check` 1,000 steps / 30 steps", f"{c1k / c30:.2f}× ({c1k:.1f} vs {c30:.1f} ms)", "≤ 2.5×", c1k / c30 <= 2.5)
    if LOAD_RSS.get("check1000"):
        mb = LOAD_RSS["check1000"] * 1024 / 1e6
        lgoal("`check` 1,000 steps, peak RSS", f"{mb:.1f} MB ({LOAD_RSS['check1000'] / 1024:.1f} MiB)", "≤ 12 MB", mb <= 12)
    if c30 and v:
        lgoal("`check` 30 steps / `--version`", f"{c30 / v:.2f}× ({c30:.1f} vs {v:.1f} ms)", "≤ 2×", c30 / v <= 2)
    if dr and v:
        lgoal(f"dry-run of {DRY} steps − `--version`", f"{dr - v:.1f} ms ({dr:.1f} − {v:.1f})", "≤ 5 ms", dr - v <= 5)
    if LOAD.get("true") and v:
        w("")
        w(f"(`/bin/true`, the cost of starting any process here: {LOAD['true']:.2f} ms; `--version` is "
          f"{v - LOAD['true']:.2f} ms above it.)")

# ---------------------------------------------------------------- 8. scale
if has("scale"):
    w("")
    w(f"## 8. How cost grows: one `true` on {', '.join(map(str, SCALE))} hosts (issue 32 item 7)")
    w("")
    w("sshd instances on 127.0.0.1 started by the bench (one per host). runbook runs the fan-out "
      "runbook with `parallel` at no limit (all at once, as the bash loop), cold (a new master per "
      "host, closed at the end) and warm (`--keep-connections`: the masters a run before kept); the "
      "bash loop runs `ssh host true &` per host then waits, cold (`ControlPath=none`) and warm (over "
      "ControlPersist masters started before the rounds). Interleaved rounds; median (min–max) ms. "
      "Memory: one sampled run each (peakmem.py tree PSS); a warm run's tree is runbook alone (its "
      "masters were started by an earlier run, outside the tree).")
    w("")
    w("| hosts | runbook cold | bash cold | cold ratio | runbook warm | bash warm | warm ratio | tree PSS MiB: cold, warm, bash cold | warm PSS per host MiB |")
    w("|---|---|---|---|---|---|---|---|---|")
    SC = {}
    for n in SCALE:
        def mm(c):
            xs = times.get(("scale", c, n), [])
            return (med(xs), min(xs), max(xs)) if xs else (None, None, None)
        rc, bc, rw, bw = mm("runbook"), mm("bash_bg"), mm("runbook_warm"), mm("bash_bg_warm")
        mc, mw, mb = mem_of("scale", "runbook", n), mem_of("scale", "runbook_warm", n), mem_of("scale", "bash_bg", n)
        SC[n] = (rc[0], bc[0], rw[0], bw[0], mc, mw, mb)
        cell = lambda t: "—" if t[0] is None else f"{t[0]:,.0f} ({t[1]:,.0f}–{t[2]:,.0f})"
        pss = lambda js: "—" if not js else f"{js['peak_pss_kib'] / 1024:.1f}"
        w(f"| {n} | {cell(rc)} | {cell(bc)} | {ratio(rc[0], bc[0])} | {cell(rw)} | {cell(bw)} | {ratio(rw[0], bw[0])} | "
          f"{pss(mc)}, {pss(mw)}, {pss(mb)} | {fmt(mw['peak_pss_kib'] / 1024 / n if mw else None, 3)} |")
        for kind, r_, b_ in (("cold", rc[0], bc[0]), ("warm", rw[0], bw[0])):
            if r_ and b_:
                add_goal("7", f"fan-out of one command to {n} hosts, {kind}: runbook / bash `ssh &` loop",
                     f"{r_ / b_:.2f}× ({r_:,.0f} vs {b_:,.0f} ms)", "≤ 1.2×", r_ / b_ <= 1.2)
    ws = [n for n in SCALE if SC[n][5]]
    if len(ws) >= 2:
        a, b = ws[0], ws[-1]
        pa, pb = SC[a][5]["peak_pss_kib"] / 1024, SC[b][5]["peak_pss_kib"] / 1024
        per = (pb - pa) / (b - a)
        w("")
        w(f"Warm, runbook's own memory grows by {per:.3f} MiB per host from {a} to {b} hosts "
          f"({pa:.1f} → {pb:.1f} MiB: {pb / pa:.2f}× for {b / a:.0f}× the hosts).")
        add_goal("7", f"memory per host, warm ({a} → {b} hosts): growth of runbook's tree PSS per added host",
             f"{per:.3f} MiB per host ({pa:.1f} → {pb:.1f} MiB)", "≤ 0.5 MiB per host", per <= 0.5)
        add_goal("7", f"memory grows no faster than hosts, warm ({a} → {b})",
             f"{pb / pa:.2f}× for {b / a:.0f}× hosts", f"≤ {b / a:.0f}×", pb / pa <= b / a)
    cs = [n for n in SCALE if SC[n][4]]
    if len(cs) >= 2:
        a, b = cs[0], cs[-1]
        pa, pb = SC[a][4]["peak_pss_kib"] / 1024, SC[b][4]["peak_pss_kib"] / 1024
        w(f"Cold (runbook and its masters): {(pb - pa) / (b - a):.2f} MiB per host from {a} to {b} hosts "
          f"({pa:.1f} → {pb:.1f} MiB), nearly all of it the ssh masters.")
    idle = idle_masters("scale_kept_idle")
    if idle:
        k, md, lo, hi = idle
        w(f"The {k} kept masters, idle after the warm runs: {md / 1024:.2f} MiB PSS each (median; "
          f"{lo / 1024:.2f}–{hi / 1024:.2f}), {k * md / 1024:.0f} MiB together: with runbook's own warm "
          f"figure, what a warm fan-out to {k} hosts holds on this machine.")
    # runbook's records: where a fan-out's time goes
    rec_rows = []
    for kind, sub in (("cold", "scale-"), ("warm", "scale-warm-")):
        for n in SCALE:
            runs = records(f"{sub}{n}")
            if not runs:
                continue
            spread, first, step, after, dur, acts = [], [], [], [], [], []
            for evs in runs:
                st = [ts_ms(e) for e in evs if e.get("event") == "action_started"]
                out = [ts_ms(e) for e in evs if e.get("event") == "action_pgid"]
                sf = [e for e in evs if e.get("event") == "step_finished"]
                acts += [e["duration_ms"] for e in evs if e.get("event") == "action_finished"]
                if st:
                    spread.append(max(st) - min(st))
                if st and out:
                    first.append(min(out) - min(st))
                if sf:
                    step.append(sf[-1]["duration_ms"])
                    after.append(ts_ms(evs[-1]) - ts_ms(sf[-1]))
                dur.append(evs[-1]["duration_ms"])
            rec_rows.append((kind, n, len(runs), med(dur), med(step), med(spread), med(first), med(acts), med(after)))
    if rec_rows:
        w("")
        w("From runbook's records of the timed runs (medians): how long the `parallel` step took, how far "
          "apart the first and last host's command started, when the first command was seen running on "
          "its host (its process group reported), a host's command from start to exit status (connect "
          "included when cold), and the time from the step's end to the run's end (closing the sessions, "
          "and the masters when cold).")
        w("")
        w("| run | hosts | runs | run ms | step ms | command starts spread over ms | first command running after ms | a host's command ms | step end → run end ms |")
        w("|---|---|---|---|---|---|---|---|---|")
        for kind, n, k, dur, step, spread, first, act, after in rec_rows:
            w(f"| {kind} | {n} | {k} | {fmt(dur, 0)} | {fmt(step, 0)} | {fmt(spread, 0)} | {fmt(first, 0)} | {fmt(act, 0)} | {fmt(after, 0)} |")
    # what runbook prints
    big = SCALE[-1]
    import re
    ansi = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

    def screen(text):
        """What stays on a terminal: per line, the last segment a carriage return left."""
        out = []
        for line in text.split("\n"):
            segs = [ansi.sub("", x) for x in line.split("\r")]
            segs = [x for x in segs if x.strip()]
            if segs:
                out.append(segs[-1].rstrip())
        return out

    for kind, fname in (("not a terminal (the log; cold)", f"scale-print-cold-{big}.txt"),
                        ("a terminal (a pty, 120 columns; warm)", f"scale-print-pty-{big}.txt")):
        path = os.path.join(work, fname)
        if not os.path.exists(path):
            continue
        raw = open(path, errors="replace", newline="").read()   # keep the carriage returns
        shown = screen(raw)
        per_host = [l for l in shown if re.search(r"\[\d+/%d\] node\d+: " % big, l)]
        hosts_seen = {re.search(r"node\d+", l).group(0) for l in per_host}
        summary = [l for l in shown if re.match(r"^(ok|failed|interrupted): ", l)]
        ok = len(per_host) == big and len(hosts_seen) == big and len(summary) == 1
        w("")
        w(f"What runbook prints for {big} hosts on {kind}: {len(shown)} lines, {len(raw):,} bytes; "
          f"{len(per_host)} lines of the form `[i/{big}] host: result`, naming {len(hosts_seen)} hosts; "
          f"summary line{'s' if len(summary) != 1 else ''}: {len(summary)}. First and last lines:")
        w("")
        w("```text")
        sample = shown if len(shown) <= 12 else shown[:6] + ["…"] + shown[-5:]
        for l in sample:
            w(l[:160])
        w("```")
        add_goal("7", f"output for {big} hosts on {kind.split(' (')[0]}: one line per host and a summary",
             f"{len(per_host)} host lines for {big} hosts, {len(summary)} summary, {len(shown)} lines in all",
             "one per host + summary", ok)

# ---------------------------------------------------------------- 9. clean-reset
CLEAN_ROWS = []
POLL = "new lines of "   # the summary of proc.wait_for's poll of a log
if has("clean"):
    w("")
    w("## 9. The main job end to end: `runbook run clean-reset` (issue 32 item 5)")
    w("")
    w("The shipped runbooks/clean-reset.lua on the demo training project (examples/train: a venv "
      "built by uv with no packages, the code restored by git, a warm-up that fills a cache, the "
      "training relaunched, its throughput line waited for), as tests/clean_reset.rs runs it: on "
      "this machine, and in container 200 of the `pct` double behind node1's sshd. Each round "
      "does a first recovery (a state dir of its own: no known-good cache yet, so it compiles and "
      "captures) and then a second on the same state (it restores the cache the first captured). "
      "From each run's record: the run's wall (`run_finished.duration_ms`), the time commands ran "
      "on targets (the union of every action's start–finish span, so commands run at once count "
      "once), and runbook's own time, the rest: Lua, events, the record, waiting between polls. "
      "The process wall adds start-up, loading the runbook and closing connections.")
    w("")
    w("| run | runs | own / run, median (min–max) | own without the pauses between polls / run | the median run: process wall ms | run (record) ms | commands on targets ms | runbook's own ms | of which paused between two polls of the log ms | its largest gaps between commands (ms, after → before) |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for case, sub in (("local", "clean-local-"), ("local_again", "clean-local-"), ("pct", "clean-pct-"), ("pct_again", "clean-pct-")):
        per = []
        for d in sorted(glob.glob(os.path.join(work, "state", sub + "*"))):
            runs = records(os.path.basename(d))
            idx = 1 if case.endswith("_again") else 0
            if len(runs) <= idx:
                continue
            evs = runs[idx]
            starts = {e["action"]: e for e in evs if e.get("event") == "action_started"}
            spans, gaps = [], []
            for e in evs:
                if e.get("event") == "action_finished" and e["action"] in starts:
                    spans.append((ts_ms(starts[e["action"]]), ts_ms(e), starts[e["action"]]["summary"]))
            on = union_ms([(a, b) for a, b, _ in spans])
            dur = evs[-1]["duration_ms"]
            srt = sorted(spans)
            end, last = ts_ms(evs[0]), "start"
            for a, b, summ in srt:
                if a > end:
                    gaps.append((a - end, last, summ))
                if b >= end:
                    end, last = b, summ
            gaps.append((ts_ms(evs[-1]) - end, last, "the end"))
            # proc.wait_for: a poll that read lines without a match waits out the rest of its
            # interval before the next; the job it waits for runs meanwhile.
            pause = sum(g for g, a, b in gaps if a.startswith(POLL) and b.startswith(POLL))
            wall = next((ms for (it, c, n, r), ms in WALL_BY_ROUND.items()
                         if (it, c) == ("clean", case) and r == os.path.basename(d)[len(sub):]), None)
            per.append((dur, on, dur - on, sorted(gaps, reverse=True)[:3], pause, wall))
        if not per:
            continue
        pcts = [p[2] / p[0] * 100 for p in per]
        rests = [(p[2] - p[4]) / p[0] * 100 for p in per]
        own_pct, rest_pct = med(pcts), med(rests)
        # Every other column from one run, the one nearest the median share: medians of each
        # column would mix runs (a poll that waited on the target in one, a pause in another).
        dur, on, own, gaps, pause, wall = per[min(range(len(per)), key=lambda k: abs(pcts[k] - own_pct))]
        gtxt = "; ".join(f"{g:,.0f} ({a[:40]} → {b[:40]})" for g, a, b in gaps if g >= 1)
        CLEAN_ROWS.append((case, own_pct, own, dur, pause, rest_pct))
        w(f"| {LABELS['clean'][case]} | {len(per)} | {own_pct:.1f}% ({min(pcts):.1f}–{max(pcts):.1f}) | "
          f"{rest_pct:.1f}% ({min(rests):.1f}–{max(rests):.1f}) | {fmt(wall)} | {fmt(dur)} | {fmt(on)} | {fmt(own)} | "
          f"{fmt(pause)} | {gtxt or '—'} |")
    w("")
    w("The shares are medians over the rounds; the other columns are the run whose share is nearest "
      "that median. Timestamps are whole "
      "milliseconds, so each span may be off by up to 1 ms. The throughput check is `proc.wait_for` on "
      "the training log: each poll waits on the target until the log grows, then returns what it read; "
      "when that holds no matching line, runbook pauses out the rest of the poll's 1 s interval before "
      "the next poll. The training job runs meanwhile and the line it waits for may be written at any "
      "time in that pause, so the pause is an upper bound of the latency the interval adds: shown "
      "apart from the rest of runbook's own time.")
    for where, cases in (("locally", ("local", "local_again")), ("through ssh and pct", ("pct", "pct_again"))):
        rows = [r for r in CLEAN_ROWS if r[0] in cases]
        if rows:
            worst = max(r[1] for r in rows)
            add_goal("5", f"clean-reset {where}: runbook's own time / the run, median (first recovery; again)",
                 "; ".join(f"{r[1]:.1f}% (e.g. {r[2]:,.0f} of {r[3]:,.0f} ms; {r[5]:.1f}% without the pauses between polls of the log)"
                           for r in rows), "≤ 2%", worst <= 2)

# ---------------------------------------------------------------- 10. artifact
art = read_tsv("artifact.tsv")
if art:
    w("")
    w("## 10. Known-good caches: capture and restore against tar (issue 32 item 6)")
    w("")
    w("`bench/artifact.sh` (`ARTIFACT_SIZES`, `ARTIFACT_ROUNDS`): an inductor-shaped cache made by "
      "`bench/lib/inductor_like.py`; `artifact.capture` (target `local`, a local store, a fresh store "
      "each round) against `tar -czf` of the same directory, `artifact.restore` onto no cache against "
      "`tar -xzf` of that archive; whole `runbook run`s, interleaved, median (min–max). README.md says "
      "what runbook does on top of tar.")
    w("")
    w("| cache | what | runs | runbook ms | floor ms | runbook / floor |")
    w("|---|---|---|---|---|---|")
    shape, at = {}, defaultdict(list)
    for f in art:
        if f[0] == "shape":
            shape[f[1]] = (int(f[2]), int(f[3]))
        else:
            at[(f[0], f[1], f[3])].append(int(f[2]))
    for mb, (files, size) in shape.items():
        for what, floor in (("capture", "tar -czf"), ("restore", "tar -xzf")):
            a_, b_ = at.get((what, mb, "runbook")), at.get((what, mb, floor))
            if not a_ or not b_:
                continue
            r_ = med(a_) / med(b_)
            w(f"| {size / 1e6:.0f} MB, {files} files | {what} vs `{floor}` | {len(a_)} | {med(a_):,.0f} ({min(a_):,}–{max(a_):,}) | "
              f"{med(b_):,.0f} ({min(b_):,}–{max(b_):,}) | {r_:.2f}× |")
            add_goal("6", f"artifact {what}, {size / 1e6:.0f} MB inductor-shaped cache, against `{floor}`",
                 f"{r_:.2f}×", "≤ 1.3× (issue 26)", r_ <= 1.3)

# ---------------------------------------------------------------- e2e-torch
e2e = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e-torch.md")
if os.path.exists(e2e):
    w("")
    lines.extend(open(e2e).read().rstrip("\n").split("\n"))

# ---------------------------------------------------------------- the goals, at the top
top = ["## Goals of issue 32, measured in this run", ""]
if GOALS:
    top += ["Each a ratio against a floor (or a figure) measured in this run; the sections below give "
            "the tables. Never asserted in a test: a shared machine's noise moves them (the load is "
            "in the next table).", "",
            "| item | what | measured | goal | met |", "|---|---|---|---|---|"]
    for item, what, measured, text, met in sorted(GOALS, key=lambda g: g[0]):
        top.append(f"| {item} | {what} | {measured} | {text} | {'—' if met is None else 'yes' if met else '**no**'} |")
    missing = [i for i, sec in (("1", "ssh pct"), ("2", "load"), ("3", "fan"), ("4", "mem"), ("5", "clean"),
                                ("6", "artifact"), ("7", "scale")) if not any(x in ONLY for x in sec.split())]
    if missing:
        top += ["", f"Not measured in this run (`ONLY`): item{'s' if len(missing) > 1 else ''} {', '.join(missing)}."]
else:
    top += ["No goal of issue 32 was measured in this run (`ONLY`)."]
top.append("")
lines[GOALS_AT:GOALS_AT] = top
print("\n".join(lines))
