/**
 * NodeMap: which ranks share a node (the node rule's ids) and which share a
 * machine (host names), from what every rank publishes through the
 * rendezvous. Several nodes may be one machine: node ids that tests and
 * benches give ranks of one host, whose cores they share.
 */
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { exchangeNodeIds, NodeMap } from '../src/context/node-map.ts';
import type { RendezvousClient } from '../src/rendezvous/client.ts';

/** A rendezvous of one process: its keys in a map, values as bytes. */
function memoryRendezvous(): RendezvousClient {
  const values = new Map<string, Uint8Array>();
  return {
    set: async (key: string, value: string | Uint8Array) => {
      values.set(key, typeof value === 'string' ? new TextEncoder().encode(value) : value);
    },
    get: async (key: string) => {
      const value = values.get(key);
      if (!value) throw new Error(`no key ${key}`);
      return value;
    },
    check: async (keys: string[]) => keys.every((key) => values.has(key)),
  } as unknown as RendezvousClient;
}

describe('NodeMap', () => {
  it('tells the ranks of a node from the ranks of a machine', () => {
    const map = new NodeMap(['a', 'a', 'b', 'b', 'c'], [10, 11, 12, 13, 14], ['h1', 'h1', 'h1', 'h1', 'h2']);
    expect(map.ranksWith(2)).toEqual([2, 3]);
    expect(map.ranksOnHost(2)).toEqual([0, 1, 2, 3]);
    expect(map.ranksOnHost(4)).toEqual([4]);
    expect([map.count, map.indexOf(3), map.sameNode(0, 2)]).toEqual([3, 1, false]);
  });

  it('exchangeNodeIds publishes each rank’s node id, pid and host name', async () => {
    const client = memoryRendezvous();
    const [first, second] = await Promise.all([
      exchangeNodeIds(client, 0, 2, 'node-a', 1000),
      exchangeNodeIds(client, 1, 2, 'node-b', 1000),
    ]);
    for (const map of [first, second]) {
      expect(map.nodeOf).toEqual(['node-a', 'node-b']);
      expect(map.pids).toEqual([process.pid, process.pid]);
      expect(map.hosts).toEqual([hostname(), hostname()]);
      expect(map.ranksOnHost(1)).toEqual([0, 1]);
      expect(map.ranksWith(1)).toEqual([1]);
    }
  });
});
