#!/usr/bin/env bash
# Tests of scripts/services that need no service: which process a pid file
# names. Run by `make test-scripts`.
set -euo pipefail
cd "$(dirname "$0")/../.."

tmp=$(mktemp -d)
children=()
cleanup() {
	local p
	for p in "${children[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

export PROSODY_SERVICES_RUN=$tmp/run
# shellcheck source=../../scripts/services
source scripts/services
set +e # the checks below look at failures themselves

failures=0
check() { # check WANT NAME WHAT: running NAME must exit with WANT
	local want=$1 name=$2 what=$3 got=0
	running "$name" || got=$?
	[ "$got" -ne 0 ] && got=1
	if [ "$got" = "$want" ]; then
		echo "ok: $what"
	else
		echo "FAIL: $what (running $name exited $got, want $want)"
		failures=$((failures + 1))
	fi
}
pidfile() { mkdir -p "$run/$1" && echo "$2" >"$run/$1/pid"; }

# A process started like a service: a path under its data directory on its
# command line. Its first line is the id of one of its threads other than
# the main one, which waits until the test kills it.
mkdir -p "$run/jaeger"
python3 -c '
import threading
def hold():
    print(threading.get_native_id(), flush=True)
    threading.Event().wait()
threading.Thread(target=hold, daemon=True).start()
threading.Event().wait()
' --config "$run/jaeger/config.yaml" >"$tmp/tid" &
ours=$!
children+=("$ours")
for _ in $(seq 1 100); do [ -s "$tmp/tid" ] && break; sleep 0.05; done
tid=$(head -1 "$tmp/tid")
[ -n "$tid" ] || { echo "FAIL: the helper process printed no thread id"; exit 1; }

check 1 jaeger "no pid file"
pidfile jaeger "$ours"
check 0 jaeger "the pid names the service's process"
pidfile kafka "$ours"
check 1 kafka "the pid names another service's process"
pidfile jaeger "$tid"
check 1 jaeger "the pid is a thread of the process, not the process"

sleep 300 &
other=$!
children+=("$other")
pidfile jaeger "$other"
check 1 jaeger "the pid names an unrelated process"
kill "$other"; wait "$other" 2>/dev/null
check 1 jaeger "the pid names no live process"

if [ "$failures" -gt 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "services: all checks passed"
