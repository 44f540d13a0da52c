import { defineConfig } from 'vitest/config';
import base from './vitest.config.ts';

// npm run test:stress: the tests whose verdicts timing could flip, and the chaos-seeded stress file.
export default defineConfig({
  test: {
    ...base.test,
    include: [
      'test/stress/*.stress.ts',
      'test/running-ranks.test.ts',
      'test/faults.test.ts',
      'test/debug-mismatch.test.ts',
      'test/debug-report.test.ts',
      'test/work-ledger.test.ts',
    ],
  },
});
