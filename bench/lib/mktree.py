"""mktree.py DIR FILES: a tree of FILES small files (1,000 per directory, 16 bytes each)."""
import os
import sys

root, n = sys.argv[1], int(sys.argv[2])
per = 1000
for d in range((n + per - 1) // per):
    sub = os.path.join(root, f"d{d:04}")
    os.makedirs(sub, exist_ok=True)
    for i in range(min(per, n - d * per)):
        fd = os.open(os.path.join(sub, f"f{i:04}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"cache entry 0123")
        os.close(fd)
