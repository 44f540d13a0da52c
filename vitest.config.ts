import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Rank threads are CPU-bound; running test files one at a time keeps timings sane on 2 cores.
    fileParallelism: false,
  },
});
