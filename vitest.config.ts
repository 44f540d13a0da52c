import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two files at a time, also on 2 cores: most files spend their time waiting (for child processes
    // to start, for the timeouts and failures they provoke), not computing, and the tests allow for a
    // loaded machine (others' runs share it too). One at a time took the suite past 5 minutes.
    fileParallelism: true,
    maxWorkers: 2,
    // The tensorcomm command enables Node's compile cache: the processes the tests start leave none in the
    // temp directory (test/cli-compile-cache.test.ts gives it a directory of its own).
    env: { NODE_DISABLE_COMPILE_CACHE: '1' },
  },
});
