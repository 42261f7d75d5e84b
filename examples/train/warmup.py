"""Pre-warm the compile cache, single-threaded when TORCHINDUCTOR_COMPILE_THREADS=1."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels import KERNELS, cache_dir, compile_kernel  # noqa: E402

threads = int(os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "0") or 0)
root = cache_dir()
os.makedirs(root, exist_ok=True)
print("warm-up: compile threads = %s, cache = %s" % (threads or "auto", root), flush=True)
start = time.time()
for name in KERNELS:
    path = os.path.join(root, name + ".kernel")
    if os.path.exists(path):
        print("cached   %s" % name, flush=True)
        continue
    with open(path + ".tmp", "wb") as f:
        f.write(compile_kernel(name))
    os.replace(path + ".tmp", path)
    print("compiled %s" % name, flush=True)
print("warm-up done in %.2fs" % (time.time() - start), flush=True)
