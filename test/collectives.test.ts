import { spawnThreads } from '../src/index.ts';
import { conformanceSuite } from './fixtures/conformance-suite.ts';

conformanceSuite(
  'collectives in threads',
  (entry, worldSize, args) => spawnThreads(entry, { worldSize, args, collectiveTimeoutMs: 30_000 }),
  [1, 2, 3, 4, 8],
);
