# shared set-up: a throwaway copy of /tmp/attack3/base (venv: executorch 1.5.1 --no-deps + the tool)
set -u
W=$(mktemp -d /tmp/attack3/repro/work.XXXXXX)
cp -a /tmp/attack3/base "$W/env"
SP="$W/env/lib/python3.11/site-packages"
PY="$W/env/bin/python"
G="$PY -m executorch_device_guard"
trap 'rm -rf "$W"' EXIT
