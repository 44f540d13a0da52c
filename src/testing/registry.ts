/**
 * The rank side of rankTest: a rank thread imports the test file itself
 * (with 'vitest' resolved to the stand-in, vitest-stand-in.ts), and every
 * rankTest call it runs lands here instead of in vitest. describe blocks are
 * collected the way vitest collects them, after the file's own top level and
 * depth first, so the rank threads see the rankTest calls in vitest's order
 * and a test found by (name, occurrence) is the one vitest runs.
 */
import type { RankContext } from '../context/rank-context.ts';
import { LaunchError } from '../launch/errors.ts';
import { InvalidStateError } from '../runtime/errors.ts';
import { importModule } from '../runtime/import-module.ts';

export type RankTestBody = (ctx: RankContext) => unknown;

/** How the test runner's thread names a rank test to the rank threads. */
export interface RankTestId {
  /** The test file's URL. */
  file: string;
  name: string;
  /** How many rankTest calls of this name came before it in the file (0 for the first). */
  occurrence: number;
  worldSize: number;
}

interface Registered {
  body: RankTestBody;
  worldSize: unknown;
}

interface Suite {
  factory?: () => unknown;
  children: Suite[];
}

/** The file being imported: what its rankTest and describe calls register into. */
let loading: { tests: Map<string, Registered[]>; suite: Suite } | undefined;
const loaded = new Map<string, Promise<Map<string, Registered[]>>>();
/** One file loads at a time: describe blocks of two files must not interleave. */
let queue: Promise<unknown> = Promise.resolve();

/** Whether rankTest is being called by a rank thread's import of a test file (else it is vitest's thread). */
export function collectingRankTests(): boolean {
  return loading !== undefined;
}

export function addRankTest(name: string, worldSize: unknown, body: RankTestBody): void {
  const tests = loading!.tests;
  tests.set(name, [...(tests.get(name) ?? []), { body, worldSize }]);
}

/** A describe block: its factory runs once the file's top level has run, as in vitest. */
export function addSuite(factory: (() => unknown) | undefined): void {
  if (!loading) throw new InvalidStateError('describe() in a rank thread outside the import of a test file');
  loading.suite.children.push({ factory, children: [] });
}

async function collect(suite: Suite): Promise<void> {
  if (suite.factory) {
    const parent = loading!.suite;
    loading!.suite = suite;
    try {
      await suite.factory();
    } finally {
      loading!.suite = parent;
    }
  }
  for (const child of suite.children) await collect(child);
}

/** Imports the test file once per thread and collects its rank tests. */
export function loadTestFile(file: string): Promise<Map<string, Registered[]>> {
  let tests = loaded.get(file);
  if (!tests) {
    // One file imports at a time; an earlier file's failure is its own caller's, not this one's.
    tests = (queue = queue
      .catch(() => {})
      .then(async () => {
        const root: Suite = { children: [] };
        loading = { tests: new Map(), suite: root };
        try {
          await importModule(file);
          await collect(root);
          return loading.tests;
        } catch (error) {
          if (error instanceof Error)
            error.message = `importing the test file in a rank thread: ${error.message}`;
          throw error;
        } finally {
          loading = undefined;
        }
      })) as Promise<Map<string, Registered[]>>;
    loaded.set(file, tests);
  }
  return tests;
}

/** The body vitest's thread means by `id`, or an error saying why the rank thread has none. */
export async function findRankTest(id: RankTestId): Promise<RankTestBody> {
  const tests = await loadTestFile(id.file);
  const found = tests.get(id.name)?.[id.occurrence];
  const differently =
    'the file registers its rank tests differently when a rank thread imports it: rankTest must be called at ' +
    'the top level of the file or in describe blocks, the same way on every import (not in hooks, tests or code that depends on the thread)';
  if (!found) {
    const count = tests.get(id.name)?.length ?? 0;
    throw new LaunchError(
      `rankTest ${JSON.stringify(id.name)}: the rank thread's import of ${id.file} registers ${count} rank test(s) of this name, ` +
        `not the ${id.occurrence + 1} vitest counted; ${differently}`,
    );
  }
  if (found.worldSize !== id.worldSize) {
    throw new LaunchError(
      `rankTest ${JSON.stringify(id.name)}: worldSize is ${id.worldSize} in vitest's thread but ${String(found.worldSize)} in the rank thread; ${differently}`,
    );
  }
  return found.body;
}
