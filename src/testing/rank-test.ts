/**
 * rankTest: a vitest test whose body runs on every rank of a job, as
 * threads, written in the test file itself. vitest's thread registers the
 * test; when it runs, warm rank threads (RankThreadPool, one per test file)
 * import the same file with 'vitest' pointed at a stand-in, pick out the
 * same body by its name and occurrence (registry.ts), and run it with their
 * RankContext. Each test is a job of its own: fresh groups, store, config.
 */
import { pathToFileURL } from 'node:url';
import { afterAll, TestRunner, test } from 'vitest';
import { registeredOpNames } from '../debug/call-record.ts';
import { LaunchError } from '../launch/errors.ts';
import { DEFAULT_GRACE_MS } from '../launch/job-options.ts';
import { testFileBundle } from '../launch/rank-bundle.ts';
import { rankSetupUrl } from '../launch/rank-setup.ts';
import { RankThreadPool } from '../launch/rank-thread-pool.ts';
import type { SpawnThreadsOptions } from '../launch/spawn-threads.ts';
import { InvalidStateError } from '../runtime/errors.ts';
import { checkChaos, checkFaults } from '../runtime/faults/options.ts';
import { rankTestFailure } from './failure.ts';
import { addRankTest, collectingRankTests, type RankTestBody, type RankTestId } from './registry.ts';

/** The whole job (every rank's body), unless `timeoutMs` says otherwise. */
export const DEFAULT_RANK_TEST_TIMEOUT_MS = 30_000;
/** Each collective and store wait, unless `collectiveTimeoutMs` says otherwise: a hang is reported after this. */
export const DEFAULT_RANK_TEST_COLLECTIVE_TIMEOUT_MS = 10_000;

/**
 * spawnThreads' options but `args` (a body gets its ctx, and takes the rest from the file), with shorter
 * timeouts, so a hung test fails in seconds with its hang report; see the
 * [testing guide](../../docs/guides/testing.md#options).
 */
export interface RankTestOptions
  extends Omit<SpawnThreadsOptions, 'args' | 'timeoutMs' | 'collectiveTimeoutMs'> {
  /**
   * The whole job (every rank's body) in milliseconds; vitest's own timeout of the test is set above it.
   *
   * @defaultValue 30 000 ({@link DEFAULT_RANK_TEST_TIMEOUT_MS})
   */
  timeoutMs?: number;
  /**
   * Each collective, p2p call and store wait in milliseconds: a call past it fails with a
   * `CommTimeoutError` and its hang report.
   *
   * @defaultValue 10 000 ({@link DEFAULT_RANK_TEST_COLLECTIVE_TIMEOUT_MS}), or `timeoutMs` if that is shorter
   */
  collectiveTimeoutMs?: number;
}
export type { RankTestBody };

/** vitest's own timeout of a rank test sits this far above the job's: threads start before the job's timer does. */
const START_ALLOWANCE_MS = 60_000;

const KNOWN_OPTIONS = [
  'worldSize',
  'timeoutMs',
  'collectiveTimeoutMs',
  'graceMs',
  'names',
  'devices',
  'config',
  'debug',
  'faults',
  'chaos',
  'rankThreadBytes',
  'predict',
  'threads',
] as const satisfies ReadonlyArray<keyof RankTestOptions>;

const EXTENSION = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const ENTRY = new URL(`./rank-entry${EXTENSION}`, import.meta.url).href;
const STAND_IN = new URL(`./vitest-stand-in${EXTENSION}`, import.meta.url).href;
const POOL_WORKER = new URL(`../launch/pool-worker${EXTENSION}`, import.meta.url).href;

/** Per test file (vitest may run several in one module instance), how many rank tests of each name came so far. */
const occurrences = new Map<string, Map<string, number>>();
/** Warm threads for this file's tests, by whether they load TypeScript. */
const pools = new Map<boolean, RankThreadPool>();
interface BundledPool {
  pool: RankThreadPool;
  /** The bundle's test file and rank-test entry, which its threads import. */
  file: string;
  entry: string;
}
/** Per test file: the pool on threads that load one bundle of it (rank-bundle.ts), or undefined where it cannot be bundled. */
const bundledPools = new Map<string, Promise<BundledPool | undefined>>();

async function closePools(): Promise<void> {
  const all = [...pools.values()];
  const bundled = [...bundledPools.values()];
  pools.clear();
  bundledPools.clear();
  for (const found of await Promise.all(bundled)) if (found) all.push(found.pool);
  await Promise.all(all.map((pool) => pool.close()));
}

/**
 * A TypeScript test file's threads load it, with the library, from one
 * bundle (its `vitest` the stand-in), instead of each thread starting a tsx
 * loader and transpiling ~150 modules: a fraction of the CPU per thread.
 */
function bundledPool(file: string): Promise<BundledPool | undefined> {
  let found = bundledPools.get(file);
  if (!found) {
    found = testFileBundle(POOL_WORKER, rankSetupUrl(), ENTRY, file, STAND_IN).then(
      (bundle) =>
        bundle && { pool: new RankThreadPool({ bundle }), file: bundle.fileUrl, entry: bundle.entryUrl },
    );
    bundledPools.set(file, found);
  }
  return found;
}

try {
  // Imported by a test file, so this runs while vitest collects it: the threads go when the file is done.
  afterAll(closePools);
} catch {
  // Imported outside a test file's collection (a script): no tests, no threads to close.
}

function testFile(name: string): string {
  let file: string | undefined;
  try {
    file = TestRunner.getCurrentSuite()?.file?.filepath;
  } catch {
    // Outside vitest's collection there is no suite to ask: answered below, as for no file.
  }
  if (file === undefined) {
    throw new InvalidStateError(
      `rankTest ${JSON.stringify(name)}: call it at the top level of a vitest test file or in a describe block`,
    );
  }
  return file;
}

function checkDefinition(name: unknown, options: unknown, body: unknown): asserts options is RankTestOptions {
  if (typeof name !== 'string')
    throw new TypeError(`rankTest: the name must be a string, got ${typeof name}`);
  const where = `rankTest ${JSON.stringify(name)}`;
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(
      `${where}: options must be an object with at least worldSize, got ${String(options)}`,
    );
  }
  for (const key of Object.keys(options)) {
    if (!(KNOWN_OPTIONS as readonly string[]).includes(key)) {
      const hint = key === 'args' ? ' (a body takes what it needs from the file, not from args)' : '';
      throw new TypeError(
        `${where}: unknown option "${key}"${hint}; known options: ${KNOWN_OPTIONS.join(', ')}`,
      );
    }
  }
  if (typeof body !== 'function') throw new TypeError(`${where}: the body must be a function (ctx) => …`);
  const { worldSize, faults, chaos } = options as RankTestOptions;
  if (!Number.isSafeInteger(worldSize) || worldSize < 1) {
    throw new RangeError(`${where}: worldSize must be a positive integer, got ${String(worldSize)}`);
  }
  // Here rather than when the test runs, so a mistake fails the file's collection, naming the test.
  // The op names are there once the file imported tensorcomm, which a rank test needs anyway.
  const ops = registeredOpNames();
  if (ops.length > 0) checkFaults(faults, { worldSize, ops }, where);
  checkChaos(chaos, where);
}

async function runRankTest(id: RankTestId, options: RankTestOptions & { timeoutMs: number }): Promise<void> {
  try {
    rankSetupUrl();
  } catch {
    throw new LaunchError(
      `rankTest ${JSON.stringify(id.name)}: the test file must import tensorcomm itself (a value, e.g. ` +
        "`import { Tensor } from 'tensorcomm'`, not only types): its package root registers what rank threads load",
    );
  }
  const typeScript = /\.[cm]?tsx?$/.test(new URL(id.file).pathname) || ENTRY.endsWith('.ts');
  const bundled = typeScript ? await bundledPool(id.file) : undefined;
  let pool = bundled?.pool ?? pools.get(typeScript);
  if (!pool) pools.set(typeScript, (pool = new RankThreadPool({ typeScript })));
  // The threads of a bundled pool import the bundle's copy of the test file.
  const file = bundled?.file ?? id.file;
  const collectiveTimeoutMs =
    options.collectiveTimeoutMs ?? Math.min(DEFAULT_RANK_TEST_COLLECTIVE_TIMEOUT_MS, options.timeoutMs);
  try {
    await pool.run(
      ENTRY,
      { ...options, collectiveTimeoutMs, args: { ...id, file } },
      {
        module: bundled?.entry ?? ENTRY,
        arg: file,
      },
    );
  } catch (error) {
    throw rankTestFailure(error);
  }
}

type Register = typeof test | typeof test.only | typeof test.skip;

function define(register: Register, name: string, options: RankTestOptions, body: RankTestBody): void {
  // In a rank thread, importing the file: remember the body, register nothing with vitest.
  if (collectingRankTests()) {
    addRankTest(name, options?.worldSize, body);
    return;
  }
  checkDefinition(name, options, body);
  const file = testFile(name);
  const counts = occurrences.get(file) ?? new Map<string, number>();
  occurrences.set(file, counts);
  const occurrence = counts.get(name) ?? 0;
  counts.set(name, occurrence + 1);
  const id: RankTestId = { file: pathToFileURL(file).href, name, occurrence, worldSize: options.worldSize };
  const timeoutMs = options.timeoutMs ?? DEFAULT_RANK_TEST_TIMEOUT_MS;
  register(
    name,
    () => runRankTest(id, { ...options, timeoutMs }),
    timeoutMs + (options.graceMs ?? DEFAULT_GRACE_MS) + START_ALLOWANCE_MS,
  );
}

export interface RankTest {
  /** Registers a vitest test whose body runs on every rank (docs/guides/testing.md). */
  (name: string, options: RankTestOptions, body: RankTestBody): void;
  /** Like vitest's test.only: only the tests marked so run in the file. */
  only(name: string, options: RankTestOptions, body: RankTestBody): void;
  /** Like vitest's test.skip: registered, not run. */
  skip(name: string, options: RankTestOptions, body: RankTestBody): void;
}

export const rankTest: RankTest = Object.assign(
  (name: string, options: RankTestOptions, body: RankTestBody) => define(test, name, options, body),
  {
    only: (name: string, options: RankTestOptions, body: RankTestBody) =>
      define(test.only, name, options, body),
    skip: (name: string, options: RankTestOptions, body: RankTestBody) =>
      define(test.skip, name, options, body),
  },
);
