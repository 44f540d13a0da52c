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
import { type DebugOptions, spawnThreads } from '../src/index.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import type { OverheadArgs } from './debug-overhead-rank.ts';

const SETTINGS: Array<{ name: string; debug: DebugOptions }> = [
  { name: 'checks off', debug: { checks: false, callSites: false, flightRecorderSize: 0 } },
  { name: 'checks on (default)', debug: {} },
  { name: 'checks on, no call sites', debug: { callSites: false } },
];
export const OVERHEAD_GOAL = 0.1;

export interface OverheadRow {
  op: OverheadArgs['op'];
  setting: string;
  us: number;
  /** Relative to checks off: 0.05 is 5% slower. */
  overhead: number;
}

export async function runDebugOverhead(options: { quick: boolean; log: Log }): Promise<OverheadRow[]> {
  const { quick, log } = options;
  const rounds = quick ? 1 : 3;
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
  log('# debugging checks: 1 KiB calls, 2 ranks, median µs per call (jobs of each setting alternate)');
  const columns = [
    { title: 'op', width: 12, cell: (r: OverheadRow) => r.op },
    { title: 'setting', width: 28, cell: (r: OverheadRow) => r.setting },
    { title: 'time(us)', width: 11, cell: (r: OverheadRow) => fixed(r.us) },
    { title: 'vs off', width: 9, cell: (r: OverheadRow) => `${(r.overhead * 100).toFixed(1)}%` },
  ];
  for (const line of formatTable(columns, rows)) log(line);
  const main = rows.find((r) => r.op === 'allReduce' && r.setting === 'checks on (default)')!;
  log(
    `# goal: default checks cost ≤ ${OVERHEAD_GOAL * 100}% on a 1 KiB allReduce: ` +
      `${(main.overhead * 100).toFixed(1)}% -> ${main.overhead <= OVERHEAD_GOAL ? 'met' : 'NOT met'}`,
  );
  log('');
  return rows;
}

export const main = benchMain('bench/debug-overhead', runDebugOverhead);

if (isMainModule(import.meta.url)) await main();
