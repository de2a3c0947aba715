#!/usr/bin/env bash
# Builds the Node package (libprosody.so and the addon), type-checks the
# declarations and examples with tsc --strict, and runs the Node test suite
# (mock mode and the real services: Kafka on PROSODY_TEST_KAFKA, default
# localhost:9094, Cassandra on PROSODY_TEST_CASSANDRA, default
# localhost:9042; start them with `make services-up`).
# Needs Go, Node >= 20 with npm, python3, make and g++. Runs from any cwd.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# npm ci when the lockfile matches; it runs the package's install script,
# which builds libprosody.so and the addon.
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm install --no-audit --no-fund
fi

echo "== tsc --strict"
node_modules/.bin/tsc -p bindings/node/tsconfig.json
echo "tsc: clean"

echo "== node --test"
# One file at a time keeps the two-core machine responsive; every file
# creates its own topics and groups.
node --test --test-concurrency=1 --test-timeout=180000 "$here"/test/*.test.js
