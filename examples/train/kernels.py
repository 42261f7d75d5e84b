"""Where the demo's "compiled kernels" live: the inductor cache, resolved like torch does."""
import getpass
import os

KERNELS = ["attention", "mlp", "rmsnorm", "rotary", "embedding", "lm_head", "softmax", "adamw"]


def cache_dir():
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join("/tmp", "torchinductor_" + getpass.getuser())


def compile_kernel(name, work=200_000):
    """Stands in for a compile: real CPU work, deterministic output."""
    import hashlib

    h = hashlib.sha256(name.encode())
    for _ in range(work):
        h.update(b"x")
    return ("# compiled kernel %s\n%s\n" % (name, h.hexdigest())).encode()
