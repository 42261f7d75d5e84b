# script: warmup-measure.sh
# for: warmup.run
# made of: measure.sh size.sh main.sh
# args: paths...
# measure.sh PATH...: `BYTES FILES` (size_of's, from size.sh, which follows this, then
# `main "$@"`) or `missing` for each path, one line each, in order, for warmup.rs to
# compare before and after. `~/` means the target user's home.

main() {
  # lxc-attach --clear-env (PVE 9's `pct exec`) gives no HOME: `~` is then the user's home
  # from the passwd file, as a login would set it (else `~/.cache` read as `/.cache`).
  [ -n "${HOME:-}" ] || HOME=$(awk -F: -v u="$(id -u)" '$3 == u { print $6; exit }' /etc/passwd 2>/dev/null)
  for p in "$@"; do
    # shellcheck disable=SC2088 # a literal ~ is what is looked for
    case $p in "~/"*) p="$HOME/${p#"~/"}" ;; esac
    if [ -e "$p" ]; then
      size_of "$p"
    else
      echo missing
    fi
  done
}
