#!/usr/bin/env python3
"""Peak memory of a whole process tree, sampled from /proc.

Usage: peakmem.py [--interval-ms 5] -- COMMAND [ARG]...
       peakmem.py --pids PID...     # one look at running processes (idle ssh masters):
                                    # {"pids", "pss_kib": [...], "rss_kib": [...]}
Prints one JSON object on stdout; the command's own output goes to /dev/null.

Why not `/usr/bin/time -f %M` alone: GNU time reports ru_maxrss from wait4() on the
command it ran. On Linux that is the largest RSS of any ONE process among the command
and the descendants that were waited for (the kernel keeps max(maxrss, cmaxrss), and
cmaxrss is a max, not a sum). Processes running at the same time (ansible's forks,
ssh clients, a ControlMaster) are not added up, and a daemonised process (ssh -f, a
ControlPersist master) is never waited for by the command, so it is not counted at all.

This sampler makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so daemonised
descendants stay in its tree, then every interval walks the tree through
/proc/PID/task/TID/children and sums VmRSS and Pss (/proc/PID/smaps_rollup) over every
live descendant. Reported:
  peak_rss_kib    max over samples of the sum of RSS (shared pages counted once per
                  process: an upper bound)
  peak_pss_kib    max over samples of the sum of PSS (shared pages split between the
                  processes that map them: the honest "memory this tree used")
  peak_procs      most processes alive in one sample
  ru_maxrss_kib   what /usr/bin/time -f %M would print (wait4 on the command)
  leftover        descendants still alive 0.5 s after the command exited (then killed by
                  us, e.g. a ControlPersist master)
  peak_pss_by_comm_kib  at the sample with the largest PSS sum, PSS per process name
A process that lives shorter than the interval can be missed by the sums; ru_maxrss
still sees it if it was waited for. A child that shares its parent's memory (kcmp
KCMP_VM: a vfork child before its exec, which is how posix_spawn starts a program) is
the parent's memory, so it is counted once, with the parent: summed, it doubled a
runbook that was starting an ssh at the sample.
"""
import ctypes
import json
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children_of(pid):
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids.extend(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return kids


def descendants(root):
    """(pid, parent pid) of every descendant of root."""
    out, todo = [], [(k, root) for k in children_of(root)]
    while todo:
        p, parent = todo.pop()
        out.append((p, parent))
        todo.extend((k, p) for k in children_of(p))
    return out


SYS_KCMP = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)
KCMP_VM = 1


def same_memory(libc, a, b):
    """True when processes a and b share one address space (kcmp KCMP_VM)."""
    if SYS_KCMP is None:
        return False
    args = (SYS_KCMP, a, b, KCMP_VM, 0, 0)
    return libc.syscall(*(ctypes.c_long(x) for x in args)) == 0


def comm_of(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def mem_of(pid):
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def main():
    args = sys.argv[1:]
    if args[:1] == ["--pids"]:
        pids = [int(p) for p in args[1:] if p]
        got = [mem_of(p) for p in pids]
        print(json.dumps({"pids": len(pids), "rss_kib": [r for r, _ in got], "pss_kib": [s for _, s in got]}))
        return
    interval = 0.005
    if args[:1] == ["--interval-ms"]:
        interval = float(args[1]) / 1000
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit("usage: peakmem.py [--interval-ms MS] -- COMMAND...")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_RDWR)
        os.dup2(fd, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            os.execvp(args[0], args)
        finally:
            os._exit(127)
    peak_rss = peak_pss = peak_procs = samples = 0
    peak_by = {}
    status = ru = None
    start = time.monotonic()
    while True:
        pids = descendants(me)
        tot_rss = tot_pss = 0
        by = {}
        for p, parent in pids:
            if parent != me and same_memory(libc, parent, p):
                continue
            r, s = mem_of(p)
            tot_rss += r
            tot_pss += s
            c = comm_of(p)
            by[c] = by.get(c, 0) + s
        samples += 1
        if tot_pss > peak_pss:
            peak_by = by
        peak_rss, peak_pss = max(peak_rss, tot_rss), max(peak_pss, tot_pss)
        peak_procs = max(peak_procs, len(pids))
        # Reap whatever exited (the command, or an orphan re-parented to us).
        while True:
            try:
                p, st, r = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                p = 0
            if p == 0:
                break
            if p == pid:
                status, ru = st, r
        if status is not None:
            break
        time.sleep(interval)
    wall = time.monotonic() - start
    # A process already on its way out (an ssh master told to exit) gets 0.5 s to go by
    # itself before it counts as left running.
    grace = time.monotonic() + 0.5
    while descendants(me) and time.monotonic() < grace:
        try:
            os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.01)
    left = [p for p, _ in descendants(me)]
    for p in left:
        try:
            os.kill(p, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + 2
    while descendants(me) and time.monotonic() < deadline:
        try:
            os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.01)
    for p, _ in descendants(me):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    code = os.waitstatus_to_exitcode(status)
    print(json.dumps({
        "exit": code, "wall_s": round(wall, 3), "samples": samples,
        "peak_rss_kib": peak_rss, "peak_pss_kib": peak_pss, "peak_procs": peak_procs,
        "ru_maxrss_kib": ru.ru_maxrss, "leftover": len(left), "peak_pss_by_comm_kib": peak_by,
    }))


if __name__ == "__main__":
    main()
