"""A stand-in training loop: prints `step N | loss L | X Ktok/s` lines to stdout."""
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels import KERNELS, cache_dir, compile_kernel  # noqa: E402

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
tokens_per_step = 2048

loaded = 0
for name in KERNELS:
    path = os.path.join(cache_dir(), name + ".kernel")
    if os.path.exists(path):
        loaded += 1
    else:
        compile_kernel(name, work=800_000)  # a cold cache: compile at start, slowly
print("loaded %d/%d kernels from %s" % (loaded, len(KERNELS), cache_dir()), flush=True)

window_start, window_tokens = time.time(), 0
for step in range(1, steps + 1):
    h = hashlib.sha256()
    for t in range(tokens_per_step):
        h.update(t.to_bytes(4, "little"))
    window_tokens += tokens_per_step
    if step % 20 == 0:
        elapsed = max(time.time() - window_start, 1e-6)
        loss = 4.0 / (1 + step / 50)
        print("step %d | loss %.2f | %.1f Ktok/s" % (step, loss, window_tokens / elapsed / 1000), flush=True)
        window_start, window_tokens = time.time(), 0
    time.sleep(0.005)
print("training finished", flush=True)
