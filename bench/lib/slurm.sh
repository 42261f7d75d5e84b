# A throw-away Slurm cluster on this machine for benchmarks: munged with its own key and
# socket, slurmctld, and one slurmd per node (`slurmd -N`), all in DIR; a running job on
# every node. The same setup as tests/common/slurm.rs.
#   slurm_start DIR N     # sets SLURM_CONF (exported), SLURM_JOB (the running job)
#   slurm_stop
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
slurm_start() {
  local dir=$1 n=$2 host cpus mem i
  mkdir -p "$dir/state" "$dir/log"
  host=$(hostname -s)
  cpus=$(slurmd -C | tr ' ' '\n' | sed -n 's/^CPUs=//p')
  mem=$(slurmd -C | tr ' ' '\n' | sed -n 's/^RealMemory=//p')
  mungekey -c -b 1024 -f -k "$dir/munge.key"
  {
    echo "ClusterName=runbookbench"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=$(free_port)"
    echo "SlurmUser=root"; echo "SlurmdUser=root"
    echo "AuthType=auth/munge"; echo "AuthInfo=socket=$dir/munge.sock"; echo "CredType=cred/munge"
    echo "StateSaveLocation=$dir/state"; echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"; echo "SlurmdPidFile=$dir/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"; echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"; echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"; echo "AccountingStorageType=accounting_storage/none"
    echo "SelectType=select/cons_tres"; echo "SelectTypeParameters=CR_CPU"; echo "MpiDefault=none"
    echo "ReturnToService=2"; echo "KillWait=2"
    for i in $(seq "$n"); do
      echo "NodeName=b$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$(free_port) CPUs=$cpus RealMemory=$mem"
    done
    echo "PartitionName=bench Nodes=b[1-$n] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8"
  } >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf
  munged -f --socket="$dir/munge.sock" --key-file="$dir/munge.key" --log-file="$dir/log/munged.log" \
    --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed"
  slurmctld -f "$SLURM_CONF"
  for i in $(seq "$n"); do mkdir -p "$dir/spool/b$i"; slurmd -f "$SLURM_CONF" -N "b$i"; done
  SLURM_DIR=$dir
  for _ in $(seq 150); do
    [ "$(sinfo -h -N -o %t | grep -c idle)" = "$n" ] && break; sleep 0.2
  done
  SLURM_JOB=$(sbatch --parsable --nodes="$n" --ntasks-per-node=1 --output=/dev/null --wrap 'exec sleep 3600')
  for _ in $(seq 150); do
    [ "$(squeue -h -j "$SLURM_JOB" -o %T)" = RUNNING ] && break; sleep 0.2
  done
}
slurm_stop() {
  [ -n "${SLURM_DIR:-}" ] || return 0
  scancel "$SLURM_JOB" 2>/dev/null || true
  sleep 3
  local f
  for f in "$SLURM_DIR"/slurmd-*.pid "$SLURM_DIR/slurmctld.pid" "$SLURM_DIR/munged.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  return 0
}
