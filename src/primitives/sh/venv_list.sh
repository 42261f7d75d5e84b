# script: venv-list.sh
# for: venv.build
# args: uv venv
# The venv's Python version, then `uv pip list` as JSON on the next line.
"$2/bin/python" -c 'import platform; print(platform.python_version())' && "$1" pip list --format json --python "$2/bin/python"
