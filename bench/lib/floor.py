"""The floor of a persistent session: one SSH channel running a minimal read-eval loop
(bash --posix, as runbook's), driven one command at a time, each answered by its exit
status and the end of both streams before the next is sent: the round trips a runbook
makes, with nothing else. Not a tool: bench/run times it like one, to show what a
command costs through one channel on this machine before any of runbook's own work.

  floor.py SSH_CONFIG HOST N builtin   # the loop runs the shell's builtin `true`: no
                                       # process per command (how issue 14's prototype
                                       # was measured)
  floor.py SSH_CONFIG HOST N process [PATH]
                                       # each command is a job of its own (a process
                                       # group, bash's job control) that execs
                                       # /usr/bin/true (or PATH, absolute), as every
                                       # runbook command does
  floor.py … --wrap 'pct exec 200 --'  # the loop runs inside what the words enter (the
                                       # pct double's container, as runbook's session
                                       # through pct does): the floor of pct

The loop prints "TOKEN end STATUS" on stdout and "TOKEN end" on stderr per command; this
driver waits for both. Exit status 0 when all N commands answered 0."""
import os
import secrets
import selectors
import subprocess
import sys

argv = sys.argv[1:]
wrap = ""
if "--wrap" in argv:
    i = argv.index("--wrap")
    wrap = argv[i + 1] + " "
    del argv[i:i + 2]
cfg, host, n, mode = argv[0], argv[1], int(argv[2]), argv[3]
cmd = {"builtin": "true", "process": "/usr/bin/true"}[mode]
if mode == "process" and len(argv) > 4 and argv[4].startswith("/"):
    cmd = argv[4]

# `set -m`: every `&` job gets a process group of its own (no terminal needed under
# bash). The loop's own stderr is /dev/null (job control reports jobs there); fd 3 is
# the channel's.
LOOP = r"""
set -m
exec 3>&2 2>/dev/null
printf 'ready\n'
while IFS=' ' read -r t c; do
  case $c in
    /*) "$c" & wait "$!" ;;
    *) eval "$c" ;;
  esac
  printf '\036%s end %s\n' "$t" "$?"
  printf '\036%s end\n' "$t" >&3
done
"""
line = "exec " + wrap + "bash --posix -c '" + LOOP.replace("'", "'\\''") + "'"
p = subprocess.Popen(
    ["ssh", "-F", cfg, "-o", "ControlPath=none", host, line],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
out, err = p.stdout.fileno(), p.stderr.fileno()
got = b""
while b"ready\n" not in got:
    chunk = os.read(out, 65536)
    if not chunk:
        sys.exit(f"floor.py: the loop did not start: {p.stderr.read().decode(errors='replace')}")
    got += chunk
sel = selectors.DefaultSelector()
sel.register(out, selectors.EVENT_READ, "out")
sel.register(err, selectors.EVENT_READ, "err")
bad = 0
for _ in range(n):
    tok = secrets.token_hex(16)
    end = f"\036{tok} end".encode()
    os.write(p.stdin.fileno(), f"{tok} {cmd}\n".encode())
    bufs = {"out": b"", "err": b""}
    while not all(end in b for b in bufs.values()):
        for key, _ in sel.select():
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sys.exit("floor.py: the channel ended")
            bufs[key.data] += chunk
    status = bufs["out"].split(end, 1)[1].split(b"\n", 1)[0].strip()
    bad += status != b"0"
p.stdin.close()
p.wait()
sys.exit(1 if bad or p.returncode else 0)
