#!/usr/bin/env bash
# The GPU check: on a machine with a GPU, runs the GPU test suite (device
# tensors, NCCL with world size 1, same-GPU ranks as threads and processes for
# every collective and dtype, CUDA IPC, P2P) and a short benchmark, in under
# 5 minutes. Brings its own Node and node_modules from .gpu-bundle/ (made by
# scripts/gpu-bundle.sh) when the machine has none. Exit codes: 0 passed,
# 1 a test or the bench failed, 2 setup impossible, 3 no usable GPU (stopped
# before the suite; everything up to that point ran).
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n== %s\n' "$*"; }
bundle=.gpu-bundle

step "node"
major=0
command -v node >/dev/null && major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  [ -f "$bundle/node.xz" ] || { echo "gpu-check: no Node >= 20 here and no $bundle/node.xz; run scripts/gpu-bundle.sh where Node is" >&2; exit 2; }
  mkdir -p "$bundle/bin"
  [ -x "$bundle/bin/node" ] || { xz -dc "$bundle/node.xz" > "$bundle/bin/node.tmp" && chmod +x "$bundle/bin/node.tmp" && mv "$bundle/bin/node.tmp" "$bundle/bin/node"; }
  export PATH="$PWD/$bundle/bin:$PATH"
fi
echo "node $(node --version) at $(command -v node)"

step "node_modules"
if [ ! -d node_modules/vitest ]; then
  [ -f "$bundle/node_modules.tar.xz" ] || { echo "gpu-check: no node_modules and no $bundle/node_modules.tar.xz" >&2; exit 2; }
  xz -dc "$bundle/node_modules.tar.xz" | tar -xf -
fi
echo "node_modules ready"

step "GPU"
if command -v nvidia-smi >/dev/null; then nvidia-smi -L || true; else echo "nvidia-smi: not found"; fi
set +e
node --import tsx scripts/gpu-probe.ts
probe=$?
set -e
if [ "$probe" -ne 0 ]; then
  echo "gpu-check: stopped before the GPU suite: no usable GPU (see above)"
  exit 3
fi

step "GPU test suite"
TENSORCOMM_GPU_SUITE=require timeout 240 node node_modules/vitest/vitest.mjs run test/gpu

step "GPU benchmark"
timeout 60 node --import tsx bench/gpu.ts
