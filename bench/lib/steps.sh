# Shared by bench/engine.sh and bench/run: a runbook of N steps, each planning one change
# (a `touch` on the local target), as issue 32 item 2 sizes `check` by.
#   gen_steps N FILE
gen_steps() {
  local n=$1 f=$2 i
  {
    echo "runbook { name = \"big\", description = \"$n steps\", params = { dir = { type = \"path\", default = \"/tmp/runbook-bench-big\" } } }"
    echo 'local here = target("local")'
    for i in $(seq 1 "$n"); do
      echo "step(\"step $i\", function() here:exec({ \"touch\", params.dir .. \"/f$i\" }) end)"
    done
  } >"$f"
}
