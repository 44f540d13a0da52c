/**
 * What the default-on debugging checks cost: a 1 KiB allReduce (goal: at
 * most 10% slower with the checks on) and a 1 KiB broadcast (a rooted call,
 * which also pays the fingerprint exchange), with checks on, on without call
 * sites, and off. Jobs of each setting alternate, in the same run.
 *
 *   npx tsx bench/debug-overhead.ts [--quick] [--json <file>]
 */

import { median } from '../src/cli/bench/collectives-rank.ts';
import { fixed, formatTable } from '../src/cli/bench/table.ts';
import { captureSite } from '../src/debug/call-site.ts';
import { RankMonitor } from '../src/debug/monitor.ts';
import { resolveDebugOptions } from '../src/debug/options.ts';
import { ThreadStatusBoard } from '../src/debug/status-board.ts';
import { type DebugOptions, spawnThreads } from '../src/index.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import type { OverheadArgs } from './debug-overhead-rank.ts';

const SETTINGS: Array<{ name: string; debug: DebugOptions }> = [
  { name: 'checks off', debug: { checks: false, callSites: false, flightRecorderSize: 0 } },
  { name: 'checks on (default)', debug: {} },
  { name: 'checks on, no call sites', debug: { callSites: false } },
];
export const OVERHEAD_GOAL = 0.1;

/**
 * The checks' own per-call work, timed in one thread (steadier than two-rank
 * timings on a loaded machine): the monitor's bookkeeping of a call (status
 * row, flight recorder) and, apart, one stack capture, which SiteBudget
 * holds to 3% of the rank's time.
 */
function perCallCosts(iters: number): { bookkeepingUs: number; siteUs: number } {
  const board = new ThreadStatusBoard(ThreadStatusBoard.createShared(2));
  const monitor = new RankMonitor(0, board, resolveDebugOptions({ callSites: false }, {}));
  const group = monitor.registerGroup('w0.1.0', 'world');
  const peers = [1];
  const time = (step: (i: number) => void) => {
    for (let i = 0; i < iters; i++) step(i);
    const started = performance.now();
    for (let i = 0; i < iters; i++) step(i);
    return ((performance.now() - started) / iters) * 1000;
  };
  const bookkeepingUs = time((seq) => {
    const call = { group: 'world', groupCode: group, groupSize: 2, seq, op: 'allReduce', bytes: 1024, peers };
    monitor.end(monitor.begin({ ...call, call: 'allReduce(float32[256], sum)' }));
  });
  const siteUs = time(() => captureSite());
  monitor.close();
  return { bookkeepingUs, siteUs };
}

export interface OverheadRow {
  op: OverheadArgs['op'];
  setting: string;
  us: number;
  /** Relative to checks off: 0.05 is 5% slower. */
  overhead: number;
}

export interface OverheadReport {
  rows: OverheadRow[];
  bookkeepingUs: number;
  siteUs: number;
}

export async function runDebugOverhead(options: { quick: boolean; log: Log }): Promise<OverheadReport> {
  const { quick, log } = options;
  const rounds = quick ? 1 : 5;
  const rows: OverheadRow[] = [];
  for (const op of ['allReduce', 'broadcast'] as const) {
    const args: OverheadArgs = {
      op,
      bytes: 1024,
      warmupIters: quick ? 500 : 3000,
      iters: quick ? 300 : 2000,
      batches: quick ? 3 : 5,
    };
    const samples = SETTINGS.map(() => [] as number[]);
    for (let round = 0; round < rounds; round++) {
      for (const [i, setting] of SETTINGS.entries()) {
        const [us] = await spawnThreads<number>(new URL('./debug-overhead-rank.ts', import.meta.url), {
          worldSize: 2,
          args,
          debug: setting.debug,
          collectiveTimeoutMs: 60_000,
        });
        samples[i].push(us);
      }
    }
    const off = median(samples[0]);
    SETTINGS.forEach((setting, i) => {
      const us = median(samples[i]);
      rows.push({ op, setting: setting.name, us, overhead: us / off - 1 });
    });
  }
  const costs = perCallCosts(quick ? 20_000 : 200_000);
  log('# debugging checks: 1 KiB calls, 2 ranks, median µs per call (jobs of each setting alternate)');
  const columns = [
    { title: 'op', width: 12, cell: (r: OverheadRow) => r.op },
    { title: 'setting', width: 28, cell: (r: OverheadRow) => r.setting },
    { title: 'time(us)', width: 11, cell: (r: OverheadRow) => fixed(r.us) },
    { title: 'vs off', width: 9, cell: (r: OverheadRow) => `${(r.overhead * 100).toFixed(1)}%` },
  ];
  for (const line of formatTable(columns, rows)) log(line);
  const main = rows.find((r) => r.op === 'allReduce' && r.setting === 'checks on (default)')!;
  const offUs = rows.find((r) => r.op === 'allReduce' && r.setting === 'checks off')!.us;
  log(
    `# per call, one thread: bookkeeping ${fixed(costs.bookkeepingUs, 3)} µs ` +
      `(${((costs.bookkeepingUs / offUs) * 100).toFixed(1)}% of the allReduce), one stack capture ` +
      `${fixed(costs.siteUs, 3)} µs (${((costs.siteUs / offUs) * 100).toFixed(1)}%; budgeted to ≤ 3% of the rank's time)`,
  );
  log(
    `# goal: default checks cost ≤ ${OVERHEAD_GOAL * 100}% on a 1 KiB allReduce: ` +
      `${(main.overhead * 100).toFixed(1)}% -> ${main.overhead <= OVERHEAD_GOAL ? 'met' : 'NOT met'}`,
  );
  log('');
  return { rows, ...costs };
}

export const main = benchMain('bench/debug-overhead', runDebugOverhead);

if (isMainModule(import.meta.url)) await main();
