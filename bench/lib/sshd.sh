# Shared by the bench scripts: start N sshd instances on 127.0.0.1 (aliases node1..nodeN)
# with throw-away keys, and write an ssh_config for them. FLEET_PATH_FIRST (optional) goes
# first on the sessions' PATH (bench/run puts the `pct` test double there, with its
# containers under DIR/pct). Source it, then:
#   fleet_start DIR N    # sets FLEET_CFG (ssh_config path); FLEET_PORTS (array)
#   fleet_stop           # kills them (also set as an EXIT trap by the caller)
fleet_start() {
  local dir=$1 n=$2 i port
  mkdir -p "$dir" /run/sshd "$dir/pct/ct/200/tmp" "$dir/pct/ct/200/root"
  ssh-keygen -q -t ed25519 -N '' -f "$dir/host" <<<y >/dev/null
  ssh-keygen -q -t ed25519 -N '' -f "$dir/client" <<<y >/dev/null
  cp "$dir/client.pub" "$dir/authorized_keys"
  : >"$dir/known_hosts"; : >"$dir/ssh_config"; FLEET_PORTS=(); FLEET_PIDS=()
  port=$(( 30000 + ($$ % 500) * 40 ))
  for i in $(seq 1 "$n"); do
    while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
    cat >"$dir/sshd_$i.conf" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host
AuthorizedKeysFile $dir/authorized_keys
PidFile $dir/sshd_$i.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
StrictModes no
PermitRootLogin yes
MaxSessions 10
MaxStartups 100:30:200
LogLevel ERROR
SetEnv SHLVL=1 RUNBOOK_LOCK_FILE=/tmp/runbook-bench-$i.lock PATH=${FLEET_PATH_FIRST:+$FLEET_PATH_FIRST:}/usr/local/bin:/usr/bin:/bin PCT_DOUBLE_ROOT=$dir/pct
CONF
    /usr/sbin/sshd -D -e -f "$dir/sshd_$i.conf" 2>>"$dir/sshd.log" &
    FLEET_PIDS+=($!)
    FLEET_PORTS+=("$port")
    echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/host.pub")" >>"$dir/known_hosts"
    printf 'Host node%s\n  HostName 127.0.0.1\n  Port %s\n  User %s\n' "$i" "$port" "$(id -un)" >>"$dir/ssh_config"
    port=$((port + 1))
  done
  printf 'Host *\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n' \
    "$dir/client" "$dir/known_hosts" >>"$dir/ssh_config"
  FLEET_CFG=$dir/ssh_config
  for port in "${FLEET_PORTS[@]}"; do
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue 2; sleep 0.05; done
    # Never up (its port taken meanwhile, say): a fleet short of a host would fail later, obscurely.
    echo "sshd.sh: the sshd on port $port did not start; $dir/sshd.log says:" >&2
    tail -5 "$dir/sshd.log" >&2
    return 1
  done
}

fleet_stop() {
  local p
  for p in "${FLEET_PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  for p in "${FLEET_PORTS[@]:-}"; do
    for pid in $(ss -Htnp state established "( sport = :$p )" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do kill "$pid" 2>/dev/null; done
  done
  return 0
}

# Milliseconds since the epoch, as a float.
now_ms() { date +%s%N | awk '{printf "%.3f", $1/1e6}'; }

# median_of "list of numbers"
median_of() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
min_of() { printf '%s\n' "$@" | sort -g | head -1; }
max_of() { printf '%s\n' "$@" | sort -g | tail -1; }
