/** The collective conformance suite with every rank an async task of one thread (spawnThreads' `threads: 1`). */
import { spawnThreads } from '../src/index.ts';
import { conformanceSuite } from './fixtures/conformance-suite.ts';

conformanceSuite(
  'collectives as tasks of one thread',
  (entry, worldSize, args) =>
    spawnThreads(entry, { worldSize, args, threads: 1, collectiveTimeoutMs: 30_000 }),
  [1, 3, 8],
);
