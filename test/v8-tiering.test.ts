/**
 * Ranks set V8's TurboFan tier-up to 1,000 calls where Maglev is on (V8 13,
 * Node 24, and later), so a long call path's compiles end early in a job
 * instead of taking cores from spinning ranks over its first 20,000 calls
 * (src/runtime/v8-tiering.ts); a flag the user gave stays. Rank threads start
 * and load under V8's own flags, under which Node's caches of its built-in
 * modules were made, and the launcher gives V8 those flags back once its jobs
 * have ended. Process ranks keep V8's own tiering.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Script } from 'node:vm';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnThreads } from '../src/index.ts';
import { FlagProbe, rankTieringFlag, tuneRankTiering } from '../src/runtime/v8-tiering.ts';
import { PACKAGE_ROOT } from './fixtures/root-importer.ts';

const exec = promisify(execFile);
const TIERING_MODULE = fileURLToPath(new URL('../src/runtime/v8-tiering.ts', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'tensorcomm-tiering-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
/**
 * A rank entry that says, past its job's start-up barrier, whether V8 refuses the code cache it is given:
 * V8 takes one only under the flags it was made with.
 */
const CACHE_REFUSED = join(scratch, 'cache-refused.mjs');
writeFileSync(
  CACHE_REFUSED,
  `import { Script } from 'node:vm';
export default async function main(ctx, cache) {
  await ctx.world.barrier();
  return new Script('void 999999999;', { cachedData: Buffer.from(cache) }).cachedDataRejected === true;
}`,
);
/** Whether ranks change V8's flags on this Node at all. */
const tunes = rankTieringFlag() !== undefined;

describe('rank tiering', () => {
  it('tiers up to TurboFan after 1,000 calls where V8 has Maglev on by default', () => {
    expect(rankTieringFlag('13.6.233.17-node.40', '')).toBe('--invocation-count-for-turbofan=1000');
    expect(rankTieringFlag('14.2.1', '--enable-source-maps')).toBe('--invocation-count-for-turbofan=1000');
  });
  it('leaves older V8s (Node 20, 22: no Maglev) as they are', () => {
    expect(rankTieringFlag('12.4.254.21-node.33', '')).toBeUndefined();
    expect(rankTieringFlag('11.3.244.8-node.31', '')).toBeUndefined();
  });
  it("leaves the user's own setting, in either spelling", () => {
    expect(rankTieringFlag('13.6.233.17', '--invocation-count-for-turbofan=5000')).toBeUndefined();
    expect(
      rankTieringFlag('13.6.233.17', '--max-old-space-size=4096 --invocation_count_for_turbofan=10'),
    ).toBeUndefined();
  });

  it("a probe says whether V8 has the flags it had at the probe's making, and gives them back", () => {
    const probe = new FlagProbe();
    expect(probe.matches()).toBe(true);
    tuneRankTiering();
    expect(probe.matches()).toBe(!tunes);
    expect(probe.restore()).toBe(true);
    expect(probe.matches()).toBe(true);
  });

  it("a probe that finds another of the program's flags changed says it cannot give them back, and V8 prints nothing", async () => {
    const driver = join(scratch, 'restore-driver.mts');
    writeFileSync(
      driver,
      `import { setFlagsFromString } from 'node:v8';
import { FlagProbe } from ${JSON.stringify(TIERING_MODULE)};
const probe = new FlagProbe();
setFlagsFromString('--expose-gc');
console.log(JSON.stringify({ matches: probe.matches(), restored: probe.restore() }));
`,
    );
    const { stdout, stderr } = await exec(process.execPath, ['--import', 'tsx', driver]);
    // --expose-gc is not the tiering flag: no starting count gives V8 the probe's flags back.
    expect(JSON.parse(stdout)).toEqual({ matches: false, restored: false });
    expect(stderr).toBe('');
  });

  it("a job's ranks run under the tiering flag, and V8 has its own flags again once the job ended", async () => {
    const before = new FlagProbe();
    // A code cache made here before the job.
    const cache = new Script('void 000000000;').createCachedData();
    expect(await spawnThreads(CACHE_REFUSED, { worldSize: 2, args: new Uint8Array(cache) })).toEqual([
      tunes,
      tunes,
    ]);
    expect(before.matches()).toBe(true);
  });

  it("a job's process ranks keep V8's own flags", async () => {
    // A code cache made by the launcher's process under V8's own flags: a launcher of its own, since this
    // test process's flags are for a while those the rank threads of the tests before set.
    const driver = join(scratch, 'process-flags-driver.mts');
    writeFileSync(
      driver,
      `import { Script } from 'node:vm';
import { launchProcesses } from ${JSON.stringify(PACKAGE_ROOT)};
const cache = new Script('void 000000000;').createCachedData();
console.log(JSON.stringify(await launchProcesses(${JSON.stringify(CACHE_REFUSED)}, { nproc: 2, args: Array.from(cache) })));
`,
    );
    const { stdout } = await exec(process.execPath, ['--import', 'tsx', driver], { timeout: 60_000 });
    expect(JSON.parse(stdout)).toEqual([false, false]);
  });

  it("rank threads take Node's code caches of its built-in modules, made under V8's own flags", async () => {
    const entry = join(scratch, 'builtins.mjs');
    writeFileSync(entry, 'export default async function main(ctx) { await ctx.world.barrier(); }');
    const driver = join(scratch, 'builtins-driver.mts');
    writeFileSync(
      driver,
      `import { spawnThreads } from ${JSON.stringify(PACKAGE_ROOT)};
for (let job = 0; job < 2; job++) await spawnThreads(${JSON.stringify(entry)}, { worldSize: 2 });
`,
    );
    const { stderr } = await exec(process.execPath, ['--import', 'tsx', driver], {
      env: { ...process.env, NODE_DEBUG_NATIVE: 'CODE_CACHE' },
      timeout: 60_000,
      maxBuffer: 16 << 20,
    });
    // What a worker loads as it starts: compiled from source in every rank thread where V8's flags differ.
    const workerStart = /Code cache of (internal\/(bootstrap|worker|process)\/\S+) \S+ is rejected/g;
    expect([...stderr.matchAll(workerStart)].map((match) => match[1])).toEqual([]);
    expect(stderr).toMatch(/Code cache of internal\/worker\/io \S+ is accepted/);
  });
});
