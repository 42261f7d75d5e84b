"""pyinfra side of bench/run: BENCH_N `server.shell` operations running BENCH_CMD, or,
with BENCH_TOUCH_DIR set, `touch DIR/fI` (the dry-run comparison)."""
import os

from pyinfra.operations import server

N = int(os.environ.get("BENCH_N", "1"))
CMD = os.environ.get("BENCH_CMD", "true")
TOUCH = os.environ.get("BENCH_TOUCH_DIR")
for i in range(1, N + 1):
    server.shell(name=f"op {i}", commands=[f"touch {TOUCH}/f{i}" if TOUCH else CMD])
