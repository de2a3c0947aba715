#!/usr/bin/env bash
# Builds and installs the Python package into build/python-venv, type-checks
# it and the examples with mypy --strict, then runs the pytest suite against
# mock mode and the real services (PROSODY_TEST_KAFKA, default
# localhost:9094; PROSODY_TEST_CASSANDRA, default localhost:9042; start them
# with `make services-up`). Needs Go, Python >= 3.10 and a C compiler.
# Extra arguments go to pytest (e.g. -k timers).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
python=${PYTHON:-python3}
venv=build/python-venv
# Leave no __pycache__ or .mypy_cache in the source tree.
export PYTHONDONTWRITEBYTECODE=1
export MYPY_CACHE_DIR="$repo/build/python-mypy-cache"

if [ ! -x "$venv/bin/python" ]; then
	"$python" -m venv "$venv"
fi
py="$repo/$venv/bin/python"
"$py" -m pip install -q --upgrade pip
# A regular (non-editable) install: the wheel carries libprosody.so.
"$py" -m pip install -q ".[test]"

echo "== mypy --strict: package (public stubs), examples"
"$py" -m mypy --strict bindings/python/prosody examples/python

echo "== mypy --strict: implementation modules (without the stubs in front of them)"
impl=$(mktemp -d)
trap 'rm -rf "$impl"' EXIT
mkdir "$impl/prosody"
# _batch is C: its stub stands for it.
cp bindings/python/prosody/*.py bindings/python/prosody/_batch.pyi bindings/python/prosody/py.typed "$impl/prosody/"
(cd "$impl" && "$py" -m mypy --strict --no-incremental prosody)

echo "== stubtest: the installed stubs match the runtime"
(cd "$repo/build" && "$py" -m mypy.stubtest prosody --allowlist "$repo/bindings/python/tests/stubtest-allowlist.txt")

echo "== pytest"
# --capture=sys leaves the library's own stderr (a Go runtime error) visible.
# The venv's pytest script, from the repository root: `python -m pytest` in
# bindings/python would import the source tree's prosody (no compiled parts).
"$repo/$venv/bin/pytest" -p no:cacheprovider --capture=sys bindings/python/tests "$@"
