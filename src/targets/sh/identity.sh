# script: identity.sh
# for: machine identity (plans, locks)
# identity.sh: what this machine (or container) says of itself, one `KEY VALUE` a line,
# `-` for what it cannot tell:
#   machine-id  /etc/machine-id, else /var/lib/dbus/machine-id (systemd and D-Bus keep
#               it for the life of an installation; a container has its own, or none)
#   boot-id     /proc/sys/kernel/random/boot_id: this boot of the kernel
#   uid         who the commands run as (the run lock is per user)
#   lock-at     where the run lock would be (`$RUNBOOK_LOCK_FILE`, else the directory
#               `runbook_dir` picks; not made here): two names for one machine whose
#               sessions see other places (cron without XDG_RUNTIME_DIR, ssh with it)
#               take two locks, never one that the other name then waits for
for f in /etc/machine-id /var/lib/dbus/machine-id; do
  m=$(cat "$f" 2>/dev/null) && [ -n "$m" ] && break
  m=-
done
b=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null) || b=-
if [ -n "${RUNBOOK_LOCK_FILE:-}" ]; then l=$RUNBOOK_LOCK_FILE
elif [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -d "$XDG_RUNTIME_DIR" ]; then l=$XDG_RUNTIME_DIR/runbook
else l=${HOME:-/root}/.local/state/runbook; fi
printf 'machine-id %s\nboot-id %s\nuid %s\nlock-at %s\n' "$m" "${b:--}" "$(id -u)" "$l"
