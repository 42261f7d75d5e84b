# script: utf8-argv.sh
# for: container targets
# utf8_argv.sh WORD...: runs the command whose words are WORD..., each decoded with
# printf %b. Docker, Podman and Kubernetes carry a command's words as JSON strings, which
# hold only UTF-8 (a byte that is not UTF-8 arrives as U+FFFD), so runbook sends such a
# command armoured (every backslash doubled, every byte that is not UTF-8 as \0NNN) and
# this, inside the container, gives each word its bytes back.
n=$#
while [ "$n" -gt 0 ]; do
  # The x keeps trailing newlines, which command substitution would strip.
  w=$(printf '%bx' "$1") || exit 125
  set -- "$@" "${w%x}"
  shift
  n=$((n - 1))
done
exec "$@"
