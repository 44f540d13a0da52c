import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { traceCommand } from '../../src/cli/trace.ts';
import { toPredictedTrace } from '../../src/predict/predicted-trace.ts';
import type { PredictedCall, PredictReport } from '../../src/predict/report.ts';
import { twoNodeReport } from './report-samples.ts';

const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-report-trace-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function p2p(
  rank: number,
  op: string,
  peer: number,
  group: string,
  seq: number,
  [startUs, endUs]: [number, number],
): PredictedCall {
  return {
    rank,
    group,
    seq,
    op,
    bytes: 64,
    algorithm: 'p2p',
    protocol: 'LL',
    startUs,
    endUs,
    busbwGBps: 1,
    peer,
  };
}

/** 4 ranks, 2 a node: an allReduce, two messages 0 -> 2, one 1 -> 3 in group pp, and one 3 -> 1 never received. */
function report(): PredictReport {
  const allReduce = (rank: number): PredictedCall => ({
    rank,
    group: 'world',
    seq: 0,
    op: 'allReduce',
    bytes: 4096,
    algorithm: 'ring',
    protocol: 'LL',
    startUs: 0,
    endUs: 10,
    busbwGBps: 0.5,
  });
  return twoNodeReport(4, 30, [
    ...[0, 1, 2, 3].map(allReduce),
    p2p(0, 'send', 2, 'world', 0, [10, 12]),
    p2p(0, 'send', 2, 'world', 1, [12, 14]),
    // listed out of order: the k-th receive is the k-th by seq
    p2p(2, 'recv', 0, 'world', 1, [12, 15]),
    p2p(2, 'recv', 0, 'world', 0, [10, 12]),
    p2p(1, 'sendViews', 3, 'pp', 0, [20, 22]),
    p2p(3, 'recvViews', 1, 'pp', 0, [20, 22]),
    p2p(3, 'send', 1, 'world', 0, [22, 24]),
  ]);
}

const nodeOf = (rank: number) => Math.floor(rank / 2);

describe('toPredictedTrace', () => {
  it('a process per node, a thread per rank, a slice per call', () => {
    const trace = toPredictedTrace(report(), nodeOf);
    const meta = trace.traceEvents.filter((e) => e.ph === 'M');
    expect(meta.map((e) => [e.name, e.pid, e.tid, e.args.name])).toEqual([
      ['process_name', 0, 0, 'node 0'],
      ['process_name', 1, 0, 'node 1'],
      ['thread_name', 0, 0, 'rank 0'],
      ['thread_name', 0, 1, 'rank 1'],
      ['thread_name', 1, 2, 'rank 2'],
      ['thread_name', 1, 3, 'rank 3'],
    ]);
    const slices = trace.traceEvents.filter((e) => e.ph === 'X');
    expect(slices).toHaveLength(report().calls.length);
    expect(slices[2]).toEqual({
      name: 'allReduce',
      cat: 'world',
      ph: 'X',
      ts: 0,
      dur: 10,
      pid: 1,
      tid: 2,
      args: { group: 'world', seq: 0, bytes: 4096, algorithm: 'ring', protocol: 'LL', busbwGBps: 0.5 },
    });
    expect(slices[6]).toMatchObject({
      name: 'recv',
      ts: 12,
      dur: 3,
      pid: 1,
      tid: 2,
      args: { peer: 0, seq: 1 },
    });
    expect(trace.displayTimeUnit).toBe('ms');
  });

  it('an arrow from each send to its receive, mid-slice at both ends; none for a send never received', () => {
    const flows = toPredictedTrace(report(), nodeOf).traceEvents.filter((e) => e.ph === 's' || e.ph === 'f');
    const ends = (id: number, cat: string) => ({ name: 'message', cat, id, args: {} });
    expect(flows).toEqual([
      { ...ends(1, 'world'), ph: 's', ts: 11, pid: 0, tid: 0 },
      { ...ends(1, 'world'), ph: 'f', ts: 11, pid: 1, tid: 2, bp: 'e' },
      { ...ends(2, 'world'), ph: 's', ts: 13, pid: 0, tid: 0 },
      { ...ends(2, 'world'), ph: 'f', ts: 13.5, pid: 1, tid: 2, bp: 'e' },
      { ...ends(3, 'pp'), ph: 's', ts: 21, pid: 0, tid: 1 },
      { ...ends(3, 'pp'), ph: 'f', ts: 21, pid: 1, tid: 3, bp: 'e' },
    ]);
  });

  it('every rank on node 0 unless told', () => {
    const events = toPredictedTrace(report()).traceEvents;
    expect(new Set(events.map((e) => e.pid))).toEqual(new Set([0]));
    expect(events.filter((e) => e.name === 'process_name')).toHaveLength(1);
  });

  it('otherData as a measured trace has it, so `tensorcomm trace` prints its summary', async () => {
    const trace = toPredictedTrace(report(), nodeOf);
    expect(trace.otherData).toEqual({
      tool: 'tensorcomm',
      predicted: true,
      topology: 'two nodes',
      worldSize: 4,
      droppedEvents: 0,
      summary: [
        { op: 'allReduce', count: 4, bytes: 16384, totalUs: 40, busbw: 0.5 },
        { op: 'send', count: 3, bytes: 192, totalUs: 6, busbw: 1 },
        { op: 'recv', count: 2, bytes: 128, totalUs: 5, busbw: 1 },
        { op: 'sendViews', count: 1, bytes: 64, totalUs: 2, busbw: 1 },
        { op: 'recvViews', count: 1, bytes: 64, totalUs: 2, busbw: 1 },
      ],
      network: {},
    });
    const file = join(dir, 'predict-trace.json');
    writeFileSync(file, JSON.stringify(trace));
    const lines: string[] = [];
    expect(await traceCommand([file], (line) => lines.push(line))).toBe(0);
    expect(lines[0]).toBe(`# ${file}: 4 ranks, 11 calls (0 dropped)`);
    expect(lines[2].trim().split(/\s+/)).toEqual(['allReduce', '4', '16384', '0.040', '0.50']);
  });
});
