#!/usr/bin/env bash
# The safety net under pressure: the tests of mistakes, injected faults, mismatches and hang reports,
# round after round with every core kept busy and a different chaos seed each round. Any failure in any
# round (a verdict that flipped) fails the run.
#   npm run test:stress          # 20 rounds
#   npm run test:stress -- 2     # .ci/run's short run
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-20}"
spinners=()
trap 'kill "${spinners[@]}" 2>/dev/null || true' EXIT
for _ in $(seq "$(nproc)"); do
  node scripts/busy-core.mjs &
  spinners+=($!)
done
npm run build --silent
for round in $(seq "$rounds"); do
  echo "stress round $round of $rounds, $(nproc) busy cores"
  TENSORCOMM_STRESS_ROUND="$round" node node_modules/vitest/vitest.mjs run --config vitest.stress.config.ts
done
