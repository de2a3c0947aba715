#!/usr/bin/env bash
# Runs examples/python/quickstart.py and keyed_state_windowing.py (mock mode) from build/python-venv,
# installing the package there first if needed.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
venv=build/python-venv
if [ ! -x "$venv/bin/python" ]; then
	"${PYTHON:-python3}" -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import prosody' 2>/dev/null; then
	"$venv/bin/python" -m pip install -q .
fi
"$venv/bin/python" examples/python/quickstart.py
# The keyed-state examples of the docs: a counter per key, windowing.
exec "$venv/bin/python" examples/python/keyed_state_windowing.py
