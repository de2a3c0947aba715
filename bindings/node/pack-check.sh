#!/usr/bin/env bash
# The package as users get it: `npm pack` the repository, install the
# tarball into an empty project (which builds libprosody.so and the addon
# from the Go sources in the tarball), then run the quickstart there in mock
# mode. Runs from any cwd; leaves nothing behind.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$root"
tarball="$(npm pack --silent --pack-destination "$work" | tail -n 1)"
echo "packed $tarball ($(du -h "$work/$tarball" | cut -f1))"

mkdir "$work/app"
cd "$work/app"
npm init -y >/dev/null
npm install --no-audit --no-fund "$work/$tarball"
cp "$root/examples/node/quickstart.js" .
ls node_modules/@prosody-events/prosody/bindings/node/build/Release/
PROSODY_LOG=warn node quickstart.js | tee out.txt
grep -q "Received message" out.txt
grep -q "quickstart: done" out.txt
echo "pack-check: OK"
