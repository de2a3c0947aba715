#!/usr/bin/env bash
# Runs the Node quickstart and the keyed-state examples in mock mode (no broker, no Cassandra), building
# the package first if needed. Runs from any cwd.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
if [ ! -f bindings/node/build/Release/prosody.node ] || [ ! -d node_modules/node-addon-api ]; then
  npm install --no-audit --no-fund
fi
PROSODY_LOG="${PROSODY_LOG:-warn}" node examples/node/quickstart.js
# The keyed-state examples of the docs (a counter per key, windowing),
# compiled from TypeScript first.
node_modules/.bin/tsc -p bindings/node/tsconfig.examples.json
PROSODY_LOG="${PROSODY_LOG:-warn}" node build/node-examples/windowing.js
