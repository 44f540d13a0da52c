/** Smoke test of the p2p bench: it runs and prints every path with positive figures; no timing is asserted. */
import { describe, expect, it } from 'vitest';
import { main } from '../bench/p2p.ts';

describe('p2p bench', () => {
  it('prints p2p and ThreadGroup anchor rows from one run (--quick)', async () => {
    const lines: string[] = [];
    const samples = await main(['--quick'], (line) => lines.push(line));
    expect(samples.map((s) => s.path)).toEqual([
      'CollectiveGroup.send/recv',
      'CollectiveGroup.sendTensor/recvTensor',
      'ThreadGroup.send/recv (anchor)',
      'ThreadGroup.sendObject/recvObject (anchor)',
      'CollectiveGroup.send/recv',
      'ThreadGroup.send/recv (anchor)',
      'ThreadGroup.send/recv, new buffers (anchor)',
      'CollectiveGroup.sendTensor/recvTensor',
    ]);
    for (const s of samples) expect(s.messages / s.seconds).toBeGreaterThan(0);
    expect(lines[2]).toMatch(/^#\s+path\s+message\s+count\s+msgs\/s\s+GB\/s$/);
    expect(lines).toHaveLength(3 + samples.length);
  });
});
