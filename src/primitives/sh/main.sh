# main.sh: runs main, which the script before it defines, with the script's arguments
# (after the pieces main uses, which follow the script).
main "$@"
