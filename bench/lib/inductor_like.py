"""inductor_like.py DIR MB: a tree shaped like a torch inductor cache of about MB megabytes:
per "graph", an FX-graph entry, generated Python and C++ kernel sources (text, compresses
well) and one compiled shared object (binary, compresses poorly), in two-letter hash
directories as inductor names them. Deterministic (seeded), so every run packs the same bytes."""
import os
import random
import sys

root, mb = sys.argv[1], float(sys.argv[2])
rng = random.Random(26)
target = int(mb * 1024 * 1024)
words = [b"buf", b"tmp", b"xindex", b"tl.load", b"tl.store", b"float", b"auto", b"for", b"return", b"def", b"kernel", b"triton_poi_fused_add_mul"]
written, g = 0, 0


def text(n):
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + b"_" + str(rng.randrange(4096)).encode() + b" "
        if rng.random() < 0.1:
            out += b"\n"
    return bytes(out[:n])


def put(path, data):
    global written
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    written += len(data)


while written < target:
    h = "%040x" % rng.getrandbits(160)
    put(os.path.join(root, "fxgraph", h[:2], "f" + h, "entry"), text(rng.randrange(2_000, 20_000)))
    put(os.path.join(root, h[2:4], "c" + h[:30] + ".py"), text(rng.randrange(4_000, 40_000)))
    put(os.path.join(root, h[4:6], "c" + h[:30] + ".cpp"), text(rng.randrange(8_000, 60_000)))
    # A shared object: machine code (random here) between symbol tables and padding
    # (text and zeros), so it compresses about as a real one does (to a half or a third).
    n = rng.randrange(60_000, 400_000)
    put(os.path.join(root, h[4:6], "c" + h[:30] + ".so"), rng.randbytes(n // 3) + text(n // 3) + bytes(n - 2 * (n // 3)))
    g += 1
print(f"{g} graphs, {written} bytes")
