#!/usr/bin/env bash
# The C ABI tests (make test-c). Needs build/lib/libprosody.so (make lib).
#
# Why AddressSanitizer and not valgrind: the test programs are built with
# -fsanitize=address and load the (uninstrumented) Go library; ASan's
# malloc interposition covers every C allocation the library makes (event
# buffers, messages, strings), and LeakSanitizer checks them at exit. It
# coexists with the Go runtime here with no suppressions (the leak canary
# below proves leak checking is live), while valgrind is slow and noisy on
# the Go runtime's signal-based preemption and custom stacks.
#
# Real Kafka: the round-trip test uses PROSODY_TEST_KAFKA (default
# localhost:9094); make test starts it. Set PROSODY_SKIP_KAFKA=1 to skip.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
out=build/c
mkdir -p "$out"
lib=build/lib
CC=${CC:-cc}
asan=(-g -O1 -fsanitize=address -fno-omit-frame-pointer)
link=(-L"$lib" -lprosody -Wl,-rpath,"$repo/$lib" -lpthread)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
step() { printf '\n== %s\n' "$*"; }

step "header and exported symbols agree"
tests/c/check_abi.sh

step "leak checking is live (a deliberate leak must be reported)"
$CC "${asan[@]}" -Iinclude tests/c/leak_canary.c "${link[@]}" -o "$out/leak_canary"
if "$out/leak_canary" 2>"$out/leak_canary.log"; then
	echo "LeakSanitizer did not report the canary's leak" >&2
	exit 1
fi
grep -q "LeakSanitizer: detected memory leaks" "$out/leak_canary.log"
echo "ok: canary leak reported"

step "API tests under AddressSanitizer"
$CC "${asan[@]}" -Wall -Wextra -Werror -Iinclude tests/c/test_capi.c "${link[@]}" -o "$out/test_capi"
args=()
kafka=${PROSODY_TEST_KAFKA:-localhost:9094}
if [ "${PROSODY_SKIP_KAFKA:-0}" = 1 ]; then
	echo "(skipping the real-Kafka test: PROSODY_SKIP_KAFKA=1)"
elif (exec 3<>"/dev/tcp/${kafka%:*}/${kafka##*:}") 2>/dev/null; then
	args+=(--kafka "$kafka" --cassandra "${PROSODY_TEST_CASSANDRA:-localhost:9042}")
else
	echo "Kafka is not reachable at $kafka: run make services-up (or PROSODY_SKIP_KAFKA=1)" >&2
	exit 1
fi
# The tests forward the library's log records to a callback and check that
# some (the engine's info records) arrive; stderr is kept for failures.
# A small GOGC makes the collector run often, so a value the Go runtime
# would reject as a pointer (a small-integer user_data) is caught.
GOGC=${GOGC:-10} PROSODY_LOG=${PROSODY_LOG:-info} "$out/test_capi" "${args[@]}" 2>"$out/test_capi.log" || {
	cat "$out/test_capi.log" >&2
	exit 1
}
if grep -q "Sanitizer" "$out/test_capi.log"; then
	cat "$out/test_capi.log" >&2
	exit 1
fi

step "make install + pkg-config, then the example (mock mode) under AddressSanitizer"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
make --no-print-directory install PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
$CC "${asan[@]}" -Wall -Wextra -Werror examples/c/prosody_example.c $(pkg-config --cflags --libs prosody) -lpthread \
	-o "$out/prosody_example"
"$out/prosody_example" >"$out/example.out" 2>"$out/example.err" || {
	cat "$out/example.out" "$out/example.err" >&2
	exit 1
}
if grep -q "Sanitizer" "$out/example.err"; then
	cat "$out/example.err" >&2
	exit 1
fi
grep -q "unsubscribed and released cleanly" "$out/example.out"
grep -c "^handled .* key=" "$out/example.out" | sed 's/^/ok: example handled /; s/$/ events/'
grep -c "^timer fired key=" "$out/example.out" | sed 's/^/ok: example fired /; s/$/ timers/'
grep -q "^timer fired key=" "$out/example.out"
echo
echo "test-c: all passed"
