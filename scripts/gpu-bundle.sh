#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU machine that may lack Node and
# the npm registry: this machine's node binary and the node_modules the GPU
# suite runs with (no linters or compilers), xz-compressed into .gpu-bundle/
# (git-ignored; carry it with the working tree). Needs xz and an installed
# node_modules (npm ci).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules/vitest ] || { echo "gpu-bundle: run npm ci first" >&2; exit 2; }
out=.gpu-bundle
rm -rf "$out" && mkdir -p "$out"
node_bin=$(readlink -f "$(command -v node)")
xz -T0 -6 -c "$node_bin" > "$out/node.xz"
node -p 'process.version' > "$out/node-version"
# Development-only tools (formatter, type checker) stay behind: the suite runs the sources through tsx.
tar --exclude='node_modules/@biomejs' --exclude='node_modules/@typescript' --exclude='node_modules/typescript' \
  --exclude='node_modules/.cache' -cf - node_modules | xz -T0 -6 > "$out/node_modules.tar.xz"
du -b "$out"/* | awk '{ total += $1; printf "%-32s %6.1f MiB\n", $2, $1 / 1048576 } END { printf "%-32s %6.1f MiB (limit 64)\n", "total", total / 1048576 }'
