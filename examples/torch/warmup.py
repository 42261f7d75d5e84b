"""Compile the training step once (forward and backward), so torch.compile's caches hold it.

Run it single-threaded (TORCHINDUCTOR_COMPILE_THREADS=1, which `warmup.run` sets): on a
warm cache it compiles nothing and writes nothing, and finishes faster.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from model import setup, train_step  # noqa: E402

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
print(
    "warm-up: torch %s, compile threads %s, cache %s"
    % (
        torch.__version__,
        os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "auto"),
        os.environ.get("TORCHINDUCTOR_CACHE_DIR", "(torch's default)"),
    ),
    flush=True,
)
start = time.time()
model, opt, batch = setup()
for i in range(1, steps + 1):
    t = time.time()
    loss = train_step(model, opt, *batch())
    print("warm-up step %d: loss %.3f, %.1fs" % (i, loss, time.time() - t), flush=True)
print("warm-up done in %.1fs" % (time.time() - start), flush=True)
