#!/usr/bin/env bash
# Fails when include/prosody.h and libprosody.so disagree: every function the
# header declares must be a defined dynamic symbol of the library, and the
# library must export nothing else. (Signatures are checked by the compiler:
# capi/shims.c, which defines every public function, includes prosody.h.)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lib=${1:-$repo/build/lib/libprosody.so}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# gcc -aux-info writes a prototype for every function declared, tagged with
# the file it came from: an exact list, not a regex over C text.
gcc -fsyntax-only -aux-info "$tmp/aux" -x c "$repo/include/prosody.h"
grep -F "/* $repo/include/prosody.h:" "$tmp/aux" |
	sed -E 's/.*[ *](prosody_[a-z_]+) \(.*/\1/' | sort -u >"$tmp/header"
nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }' | sort -u >"$tmp/library"

if ! diff -u "$tmp/header" "$tmp/library" >"$tmp/diff"; then
	echo "check_abi: include/prosody.h (-) and $(basename "$lib") (+) disagree:" >&2
	grep -E '^[-+]prosody' "$tmp/diff" >&2 || cat "$tmp/diff" >&2
	exit 1
fi
echo "check_abi: ok: $(wc -l <"$tmp/header") functions declared and exported"
