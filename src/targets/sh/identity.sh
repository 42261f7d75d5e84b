# identity.sh: what this machine (or container) says of itself, one `KEY VALUE` a line,
# `-` for what it cannot tell:
#   machine-id  /etc/machine-id, else /var/lib/dbus/machine-id (systemd and D-Bus keep
#               it for the life of an installation; a container has its own, or none)
#   boot-id     /proc/sys/kernel/random/boot_id: this boot of the kernel
#   uid         who the commands run as (the run lock is per user)
for f in /etc/machine-id /var/lib/dbus/machine-id; do
  m=$(cat "$f" 2>/dev/null) && [ -n "$m" ] && break
  m=-
done
b=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null) || b=-
printf 'machine-id %s\nboot-id %s\nuid %s\n' "$m" "${b:--}" "$(id -u)"
