/**
 * Smoke test of the collectives bench: it runs, and its table has the
 * nccl-tests columns with sensible numbers. No timing is asserted (the
 * machines are shared and noisy); only that figures exist and are positive.
 */
import { describe, expect, it } from 'vitest';
import { parseMpiOutput, tcpExchangeFloor } from '../bench/anchors.ts';
import { runCasts } from '../bench/casts.ts';
import { busFactor, runCollectivesBench } from '../bench/collectives.ts';
import { judgedBlocks, nodeVersions, pickVersions, steadinessOf } from '../bench/node-versions.ts';
import { runSmallCallsBench } from '../bench/small-calls.ts';
import { main as runStartupMain } from '../bench/startup.ts';
import { freePort } from './fixtures/free-port.ts';

const COLUMNS = ['size(B)', 'count', 'type', 'time(us)', 'algbw(GB/s)', 'busbw(GB/s)'];

/** The data lines of every table whose header has `title` among its columns. */
function tables(lines: readonly string[], title: string): string[][][] {
  const found: string[][][] = [];
  lines.forEach((line, i) => {
    if (!line.startsWith('#') || !line.slice(1).trim().split(/\s+/).includes(title)) return;
    const header = line.slice(1).trim().split(/\s+/);
    const rows: string[][] = [];
    for (let j = i + 1; j < lines.length && lines[j].trim() !== '' && !lines[j].startsWith('#'); j++) {
      rows.push(lines[j].trim().split(/\s+/));
    }
    found.push([header, ...rows]);
  });
  return found;
}

describe('collectives bench', () => {
  it('prints an nccl-tests table per op with positive figures (--quick, 2 ranks)', async () => {
    const lines: string[] = [];
    const report = await runCollectivesBench({
      quick: true,
      ops: ['allReduce', 'sendRecv'],
      worldSizes: [2],
      log: (line) => lines.push(line),
    });

    const printed = tables(lines, 'busbw(GB/s)');
    expect(printed).toHaveLength(2);
    const [allReduce, sendRecv] = printed;
    expect(allReduce[0]).toEqual(COLUMNS);
    expect(sendRecv[0]).toEqual([...COLUMNS, 'rtt(us)']);
    for (const [header, ...rows] of printed) {
      expect(rows.length).toBeGreaterThan(1);
      for (const cells of rows) {
        expect(cells).toHaveLength(header.length);
        expect(cells[header.indexOf('type')]).toBe('float32');
        for (const column of ['size(B)', 'count', 'time(us)']) {
          expect(Number(cells[header.indexOf(column)])).toBeGreaterThan(0);
        }
        // Tiny sizes print 0.00 GB/s, as nccl-tests does; the unrounded figures are checked below.
        expect(Number(cells[header.indexOf('busbw(GB/s)')])).toBeGreaterThanOrEqual(0);
      }
    }

    expect(report.rows.map((r) => r.op)).toEqual([
      ...Array(4).fill('allReduce'),
      ...Array(4).fill('sendRecv'),
    ]);
    for (const row of report.rows) {
      expect(row.worldSize).toBe(2);
      expect(row.bytes).toBe(row.count * 4);
      expect(row.timeUs).toBeGreaterThan(0);
      expect(row.algbw).toBeGreaterThan(0);
      expect(row.busbw).toBeCloseTo(row.algbw * busFactor(row.op, 2), 9);
      if (row.op === 'sendRecv') expect(row.rttUs).toBeCloseTo(row.timeUs * 2, 9);
    }

    expect(report.zeroCopy.map((z) => z.bytes)).toEqual([4096, 64 << 20]);
    for (const z of report.zeroCopy) {
      expect(z.destGetUs).toBeGreaterThan(0);
      expect(z.copyUs).toBeGreaterThan(0);
    }
    expect(lines.some((line) => line.includes('destGet(us)'))).toBe(true);
  });

  it('uses nccl-tests bus bandwidth factors', () => {
    expect(busFactor('allReduce', 4)).toBe(1.5);
    expect(busFactor('allGather', 4)).toBe(0.75);
    expect(busFactor('reduceScatter', 2)).toBe(0.5);
    expect(busFactor('allToAll', 4)).toBe(0.75);
    expect(busFactor('broadcast', 4)).toBe(1);
    expect(busFactor('sendRecv', 2)).toBe(1);
  });

  it('reads mpi_bench output into the gloo anchor’s figure names', () => {
    const figures = parseMpiOutput('p2p_rtt_us 0.987\np2p_GBps_4 0.020\nallreduce_us_4 0.90 busGBps 0.004\n');
    expect(figures).toEqual({
      p2p_rtt_us: 0.987,
      p2p_GBps_4: 0.02,
      allreduce_us_4: 0.9,
      allreduce_busGBps_4: 0.004,
    });
  });

  it('measures the loopback floor with two C processes (bench/floors/tcp_exchange.c)', async () => {
    const floor = await tcpExchangeFloor(await freePort());
    expect(floor.skipped).toBeUndefined();
    expect(Object.keys(floor.figures ?? {})).toEqual([`tcp_exchange_GBps_${64 << 20}`]);
    expect(floor.figures?.[`tcp_exchange_GBps_${64 << 20}`]).toBeGreaterThan(0);
  }, 60_000);

  it("pairs 4 B calls with Open MPI's round by round and judges the goal on the median of the rounds' ratios", async () => {
    const lines: string[] = [];
    const report = await runSmallCallsBench({ rounds: 3, log: (line) => lines.push(line) });
    expect(report.rounds).toHaveLength(3);
    for (const round of report.rounds) {
      expect(round.allReduceUs).toBeGreaterThan(0);
      expect(round.rttUs).toBeGreaterThan(0);
    }
    expect(lines.filter((line) => line.startsWith('# goal: 4 B'))).toHaveLength(2);
    if (report.skipped !== undefined) {
      expect(report.allReduceRatio).toBeUndefined();
      return;
    }
    const middle = (ratios: number[]) => ratios.sort((a, b) => a - b)[1];
    expect(report.allReduceRatio).toBeCloseTo(
      middle(report.rounds.map((r) => r.allReduceUs / (r.mpiAllReduceUs as number))),
      12,
    );
    expect(report.rttRatio).toBeCloseTo(
      middle(report.rounds.map((r) => r.rttUs / (r.mpiRttUs as number))),
      12,
    );
  }, 120_000);
});

describe('per Node version', () => {
  it('judges steadiness on the blocks after the first 10,000 round trips: each job’s worst over its median, the median of the jobs', () => {
    // Two jobs: five cold blocks each, then seven judged ones.
    const cold = [40, 30, 20, 10, 5];
    const jobs = [
      [...cold, 1, 1, 1, 1, 1, 1, 3],
      [...cold, 2, 2, 2, 2, 2, 2, 2],
    ];
    expect(judgedBlocks(jobs[0])).toEqual([1, 1, 1, 1, 1, 1, 3]);
    const steadiness = steadinessOf(jobs);
    expect(steadiness.medianUs).toBe(1.5);
    expect(steadiness.worstOverMedian).toEqual([3, 1]);
  });

  it('runs the versions --node names, and says which there are when it names none of them', () => {
    const versions = [
      { major: 20, version: 'v20.20.2', path: '/usr/bin/node' },
      { major: 26, version: 'v26.12.1', path: '/x/node26/bin/node' },
    ];
    expect(pickVersions(versions, '26')).toEqual([versions[1]]);
    expect(pickVersions(versions, 'all')).toEqual(versions);
    expect(() => pickVersions(versions, '18')).toThrow(/no Node 18 here; there are 20, 26/);
  });

  it('the machine’s node comes first, then each pinned one tools/node has fetched', () => {
    const found = nodeVersions();
    expect(found[0]).toEqual({
      major: Number.parseInt(process.versions.node, 10),
      version: process.version,
      path: process.execPath,
    });
    for (const v of found.slice(1))
      expect(v.path).toContain(`tools/node/node_modules/node${v.major}/bin/node`);
  });

  it('a single bench script refuses --node: it runs on the Node that runs it', async () => {
    await expect(runStartupMain(['--node', '26'])).rejects.toThrow(/--node is for bench\/run/);
  });
});

describe('casts bench', () => {
  it("times copy_ between float32 and the half types beside TypedArray.set, naming the runtime's Float16Array", async () => {
    const lines: string[] = [];
    const rows = await runCasts({ quick: true, log: (line) => lines.push(line) });
    expect(rows.map((r) => `${r.from}->${r.to}`)).toEqual([
      'float32->float16',
      'float16->float32',
      'float32->bfloat16',
      'bfloat16->float32',
    ]);
    for (const row of rows) {
      expect(row.castMs).toBeGreaterThan(0);
      expect(row.setMs).toBeGreaterThan(0);
    }
    const has = typeof (globalThis as { Float16Array?: unknown }).Float16Array === 'function';
    expect(lines[0]).toContain(`runtime Float16Array: ${has ? 'yes' : 'no'}`);
    expect(lines).toHaveLength(2 + rows.length);
  });
});
