# script: warmup-torch.sh
# for: warmup.run
# args: python mega script args...
# warmup_torch.sh PYTHON MEGA SCRIPT [ARG...]: runs SCRIPT with PYTHON as `PYTHON SCRIPT
# ARG...` would (sys.argv, sys.path[0] its folder, __main__, its exit status), and when it
# exits prints one line on stderr: `runbook-warmup-report ` and a JSON object, which
# warmup.rs reads (the last such line) into a typed report:
#   torch     torch.__version__, or null when SCRIPT never imported torch
#   inductor  inductor's cache dir as inductor itself resolves it (cache_dir()), or null
#   counters  {"inductor": {...}, "aot_autograd": {...}}: torch._dynamo.utils.counters'
#             groups, e.g. fxgraph_cache_hit / fxgraph_cache_miss / fxgraph_cache_bypass,
#             autograd_cache_hit / autograd_cache_miss (torch's own names, all ints)
#   mega      null, or when MEGA is a path: {"saved": bool, "bytes": N, "artifacts":
#             {"inductor": N, ...}, "reason": "..."}: torch.compiler.save_cache_artifacts()
#             (Mega-Cache, torch >= 2.7) written to MEGA (temp file + rename, so a reader
#             never sees half of it; its folder made 0700)
#   error     why a part could not be read, or null
# The report comes from atexit, so it is printed after a sys.exit or an exception in
# SCRIPT too (not after os._exit or a signal: then there is no report, and warmup.rs says
# so). The counters are read, never parsed out of torch's log text.
python=$1
shift
# shellcheck disable=SC2016 # the program is python, not sh: nothing in it expands
exec "$python" -c '
import atexit, json, os, runpy, sys

mega, script = os.path.expanduser(sys.argv[1]) if sys.argv[1] else "", sys.argv[2]
sys.argv = sys.argv[2:]
# As `python SCRIPT` sets it: imports next to the script resolve.
sys.path[0] = os.path.dirname(os.path.abspath(script))


def _counters(torch):
    from torch._dynamo.utils import counters

    return {g: {k: int(v) for k, v in counters[g].items()} for g in ("inductor", "aot_autograd")}


def _save(torch, path):
    save = getattr(getattr(torch, "compiler", None), "save_cache_artifacts", None)
    if save is None:
        return {"saved": False, "reason": "torch %s has no torch.compiler.save_cache_artifacts (Mega-Cache needs torch 2.7 or later)" % torch.__version__}
    got = save()
    if got is None:
        return {"saved": False, "reason": "torch.compiler.save_cache_artifacts() had nothing to save (nothing was compiled or loaded)"}
    data, info = got
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    kinds = {k: len(v) for k, v in getattr(info, "artifacts", {}).items()}
    return {"saved": True, "bytes": len(data), "artifacts": kinds}


def _report():
    out = {"torch": None, "inductor": None, "counters": None, "mega": None, "error": None}
    errors = []
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = str(getattr(torch, "__version__", "unknown"))
        try:
            out["counters"] = _counters(torch)
        except Exception as e:
            errors.append("counters: %s: %s" % (type(e).__name__, e))
        try:
            from torch._inductor.runtime.cache_dir_utils import cache_dir

            out["inductor"] = cache_dir()
        except Exception as e:
            errors.append("inductor cache dir: %s: %s" % (type(e).__name__, e))
        if mega:
            try:
                out["mega"] = _save(torch, mega)
            except Exception as e:
                out["mega"] = {"saved": False, "reason": "%s: %s" % (type(e).__name__, e)}
    elif mega:
        out["mega"] = {"saved": False, "reason": "the script never imported torch"}
    out["error"] = "; ".join(errors) or None
    sys.stdout.flush()
    sys.stderr.write("runbook-warmup-report " + json.dumps(out, sort_keys=True) + "\n")
    sys.stderr.flush()


atexit.register(_report)
runpy.run_path(script, run_name="__main__")
' "$@"
