#!/usr/bin/env bash
# Compiles tensorcomm's reduction kernels (src/cuda/kernels/reduce.cu) to PTX.
# The PTX is committed, so a machine with a GPU driver but no CUDA toolkit can
# load it; rerun this after editing reduce.cu or reduce-ops.h (a test fails
# while the committed file is stale).
#
# compute_75 is the oldest virtual architecture nvcc 13 accepts; the driver
# JIT-compiles its PTX for any newer GPU.
#
# Usage: scripts/build-kernels.sh [output.ptx]   (default: src/cuda/kernels/reduce.ptx)
# nvcc is $NVCC, else nvcc on PATH, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kernels="$root/src/cuda/kernels"
output="${1:-$kernels/reduce.ptx}"

nvcc="${NVCC:-}"
if [[ -z "$nvcc" ]]; then
  if command -v nvcc >/dev/null 2>&1; then
    nvcc="$(command -v nvcc)"
  else
    nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
  fi
fi
if [[ ! -x "$nvcc" ]]; then
  echo "build-kernels.sh: nvcc not found (tried \$NVCC, PATH, $nvcc); install the CUDA toolkit or set NVCC" >&2
  exit 1
fi

"$nvcc" -ptx -arch=compute_75 -std=c++17 -I "$kernels" "$kernels/reduce.cu" -o "$output"
