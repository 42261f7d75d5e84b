# script: with-env.sh
# for: env and cwd on remote targets
# Sets environment variables from standard input, then runs "$@" with the rest of
# standard input as its own. Values never pass through an argv, where every user of the
# machine could read them in /proc/PID/cmdline.
#
# Input: NAME line, VALUE line, ..., then an empty line. VALUE is escaped for printf %b
# (backslash as \\, newline as \n); every other byte is as is. `read` takes one byte at
# a time from a pipe, so nothing after the empty line is consumed.
while IFS= read -r name && [ -n "$name" ]; do
  IFS= read -r value || { echo "runbook: environment header cut short" >&2; exit 125; }
  # The x keeps trailing newlines, which command substitution would strip.
  value=$(printf '%bx' "$value")
  export "$name=${value%x}" || exit 125
done
exec "$@"
