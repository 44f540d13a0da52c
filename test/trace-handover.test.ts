/**
 * The job's one trace without a tensorcomm launcher (context/trace-handover.ts):
 * ranks hand rank 0 copies of their trace parts through the rendezvous, rank
 * 0 writes the trace once every rank reached the end, and a part the
 * rendezvous does not take stays on disk, the trace holding the others.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dropHandedPart, handTracePart, writeJobTrace } from '../src/context/trace-handover.ts';
import type { CallEntry } from '../src/debug/call-record.ts';
import { tracePartPath, writeTracePart } from '../src/debug/trace.ts';
import { RendezvousClient } from '../src/rendezvous/client.ts';
import { RendezvousServer } from '../src/rendezvous/server.ts';

function entriesOf(rank: number, calls: number): CallEntry[] {
  return Array.from({ length: calls }, (_, seq) => ({
    rank,
    group: 'world',
    groupCode: 0,
    groupSize: 3,
    seq,
    op: 'allReduce',
    call: `allReduce(float32[${rank + 1}], sum)`,
    bytes: 4 * (rank + 1),
    peers: [0, 1, 2].filter((r) => r !== rank),
    startUs: 1_000 * seq,
    endUs: 1_000 * seq + 10,
    status: 'ok',
  }));
}

describe('trace hand-over without a launcher', () => {
  let dir: string;
  let server: RendezvousServer;
  let clients: RendezvousClient[];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorcomm-trace-handover-'));
    // Values of at most 8 KiB: rank 2's part below is larger.
    server = await RendezvousServer.start({ port: 0, maxValueBytes: 8 << 10 });
    clients = await Promise.all(
      [0, 1, 2].map((rank) =>
        RendezvousClient.connect({ host: '127.0.0.1', port: server.port, rank, timeoutMs: 5_000 }),
      ),
    );
  });
  afterEach(async () => {
    for (const c of clients) c.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('rank 0 writes every part handed over; a part too large for the rendezvous stays beside the trace', async () => {
    const trace = join(dir, 'job.json');
    writeTracePart(trace, 0, entriesOf(0, 3), 0);
    writeTracePart(trace, 1, entriesOf(1, 4), 2);
    writeTracePart(trace, 2, entriesOf(2, 200), 0);
    expect(await handTracePart(clients[1], trace, 1)).toBe(true);
    expect(await handTracePart(clients[2], trace, 2)).toBe(false);
    // A copy went: until the end is reached, the part is still on disk.
    expect(existsSync(tracePartPath(trace, 1))).toBe(true);
    await writeJobTrace(clients[0], trace, 3);
    dropHandedPart(trace, 1);

    const written = JSON.parse(readFileSync(trace, 'utf8')) as {
      traceEvents: Array<{ ph: string; tid: number }>;
      otherData: { droppedEvents: number };
    };
    const calls = (rank: number) => written.traceEvents.filter((e) => e.ph === 'X' && e.tid === rank).length;
    expect([calls(0), calls(1), calls(2)]).toEqual([3, 4, 0]);
    expect(written.otherData.droppedEvents).toBe(2);
    expect(existsSync(tracePartPath(trace, 0))).toBe(false);
    expect(existsSync(tracePartPath(trace, 1))).toBe(false);
    expect(existsSync(tracePartPath(trace, 2))).toBe(true);
  });

  it('a rank whose part is missing hands nothing', async () => {
    expect(await handTracePart(clients[1], join(dir, 'none.json'), 1)).toBe(false);
  });
});
