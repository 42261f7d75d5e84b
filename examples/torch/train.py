"""Train the tiny model; prints `step N | loss L | X Ktok/s` every 20 steps."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import TOKENS_PER_STEP, setup, train_step  # noqa: E402

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
start = time.time()
model, opt, batch = setup()
train_step(model, opt, *batch())  # compiles, or loads what the warm-up cached
print("first step (compile or cache load) took %.1fs" % (time.time() - start), flush=True)
window_start, window_tokens = time.time(), 0
for step in range(1, steps + 1):
    loss = train_step(model, opt, *batch())
    window_tokens += TOKENS_PER_STEP
    if step % 20 == 0:
        elapsed = max(time.time() - window_start, 1e-6)
        print("step %d | loss %.2f | %.1f Ktok/s" % (step, loss, window_tokens / elapsed / 1000), flush=True)
        window_start, window_tokens = time.time(), 0
print("training finished", flush=True)
