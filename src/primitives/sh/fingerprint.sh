# script: fingerprint.sh
# for: fingerprint.take
# made of: fingerprint.sh size.sh main.sh
# args: python repo caches...
# fingerprint.sh PYTHON REPO CACHE...: what fingerprint.rs records about a target, one
# `@key value` line per fact. Every probe may fail on its own (no torch, no GPU, no repo)
# without hiding the others. size.sh follows this, then `main "$@"`.

main() {
  py=$1 repo=$2
  shift 2
  echo "@python $("$py" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)"
  "$py" - <<'PY' 2>/dev/null
# torch's version and CUDA build from the torch/version.py its build wrote, found
# without importing torch: `import torch` takes seconds (6.6 s here with 2.11 on a
# loaded machine), and every fingerprint and artifact key reads this. The file is
# plain assignments (__version__, cuda, ...); where it is missing or odd, torch itself.
def torch_version():
    import importlib.util
    import os
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return None
    for d in spec.submodule_search_locations or []:
        try:
            with open(os.path.join(d, "version.py")) as f:
                facts = {}
                exec(f.read(), facts)
            if isinstance(facts.get("__version__"), str):
                return facts["__version__"], facts.get("cuda")
        except Exception:
            pass
    import torch
    # A torch without torch.version (an odd build) is still known by its version.
    return str(torch.__version__), getattr(getattr(torch, "version", None), "cuda", None)


try:
    found = torch_version()
    if found:
        print("@torch", found[0])
        print("@cuda", found[1] or "")
except Exception:
    pass
import importlib.metadata as m
for d in m.distributions():
    name = d.metadata["Name"]
    if name:
        print("@pkg %s==%s" % (name.lower(), d.version))
PY
  if command -v nvidia-smi >/dev/null 2>&1; then
    # Its failures ("No devices were found", no driver) come on stdout: only a success counts.
    out=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null) && printf '%s\n' "$out" | sed 's/^/@gpu /'
    # A field of its own: older drivers do not know compute_cap, and would fail the query above.
    out=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null) && printf '%s\n' "$out" | sed 's/^/@cc /'
  fi
  echo "@platform $(uname -s -m 2>/dev/null)"
  # What changes what torch.compile makes (artifact keys): inductor's and triton's settings.
  env | grep -E '^(TORCHINDUCTOR_[A-Za-z0-9_]*|TRITON_[A-Za-z0-9_]*|TORCH_CUDA_ARCH_LIST)=' | sort | sed 's/^/@env /'
  if [ -n "$repo" ]; then
    echo "@head $(git -C "$repo" rev-parse HEAD 2>/dev/null)"
    git -C "$repo" status --porcelain 2>/dev/null | sed 's/^/@dirty /'
  fi
  # BYTES FILES PATH, as size_of measures (the path last: it may hold spaces).
  for c in "$@"; do
    [ -e "$c" ] || continue
    echo "@cache $(size_of "$c") $c"
  done
  exit 0
}
