# script: warmup-inductor-graphs.sh
# for: warmup.run
# inductor_graphs.sh: prints how many FX graph cache entries inductor's cache dir holds
# (`missing` when it has no fxgraph/ folder) on one line, then the dir itself, for
# warmup.rs to compare before and after a warm-up that should have compiled nothing.
#
# It runs with the warm-up's own environment, so the dir is the one that warm-up uses,
# found as torch/_inductor/runtime/cache_dir_utils.py finds it: TORCHINDUCTOR_CACHE_DIR,
# else tempfile.gettempdir() (TMPDIR, TEMP, TMP, then /tmp) joined with
# `torchinductor_` + getpass.getuser() (LOGNAME, USER, LNAME, USERNAME, then the passwd
# name), with \ / : * ? " < > | made `_`.
#
# Inductor writes one file per compiled graph (forward and backward are two) at
# fxgraph/KEY[1:3]/KEY/CONTENT_HASH (codecache.py: FxGraphCache._write_to_local_cache,
# through write_atomic: a `.PID.TID.tmp` file renamed into place), so the regular files
# under fxgraph/ not starting with a dot are the graphs it has compiled and kept.
user=${LOGNAME:-${USER:-${LNAME:-${USERNAME:-$(id -un 2>/dev/null)}}}}
user=$(printf '%s' "$user" | tr '\\/:*?"<>|' '_________')
dir=${TORCHINDUCTOR_CACHE_DIR:-${TMPDIR:-${TEMP:-${TMP:-/tmp}}}/torchinductor_$user}
if [ -d "$dir/fxgraph" ]; then
  find "$dir/fxgraph" -type f ! -name '.*' | wc -l | tr -d ' '
else
  echo missing
fi
printf '%s\n' "$dir"
