import { describe, expect, it } from 'vitest';
import { opCode, opName } from '../src/debug/call-record.ts';
import { OPS, type OpName } from '../src/thread-group/ops.ts';
import { ThreadGroup } from '../src/thread-group/thread-group.ts';

const SIZE = 4;

describe('the op table', () => {
  it('gives each point-to-point op the role naming its peer, and collectives none', () => {
    const p2p = Object.entries(OPS).filter(([, spec]) => spec.p2p);
    expect(p2p.map(([name]) => name).sort()).toEqual([
      'recv',
      'recvFromAny',
      'recvObject',
      'recvViews',
      'send',
      'sendViews',
    ]);
    for (const [name, spec] of Object.entries(OPS)) {
      const role = 'peerRole' in spec ? spec.peerRole : undefined;
      // A receive from any rank has no peer until a message comes.
      if (!spec.p2p || name === 'recvFromAny') expect(role, name).toBeUndefined();
      else expect(role, name).toBe(name.startsWith('send') ? 'dst' : 'src');
    }
  });

  it('derives the first-exchange keys from the roles the caller gave', () => {
    const arrival = (op: OpName, roles: Record<string, unknown>) => OPS[op].arrival(roles, SIZE);
    expect(arrival('allReduce', {})).toEqual({ kind: 'all' });
    expect(arrival('allToAllSingle', {})).toEqual({ kind: 'pairwise' });
    expect(arrival('broadcast', { src: 2 })).toEqual({ kind: 'fromRoot', root: 2 });
    expect(arrival('scatter', { src: 1 })).toEqual({ kind: 'fromRootPairwise', root: 1 });
    expect(arrival('gather', { dst: 3 })).toEqual({ kind: 'toRoot', root: 3 });
    expect(arrival('sendViews', { dst: 1, tag: 7 })).toEqual({ kind: 'send', peer: 1, tag: 7 });
    expect(arrival('recvObject', { src: 0, tag: 0 })).toEqual({ kind: 'recv', peer: 0, tag: 0 });
    expect(arrival('gatherObject', { dst: 2 })).toEqual({ kind: 'toRoot', root: 2 });
    expect(arrival('scatterObject', { src: 3 })).toEqual({ kind: 'fromRootPairwise', root: 3 });
    // monitoredBarrier's rank 0 hears from each rank and answers each, with fingerprints on or off.
    expect(arrival('monitoredBarrier', {})).toEqual({ kind: 'viaRoot', root: 0 });
    expect(arrival('recvFromAny', { tag: 0 })).toBeUndefined();
  });

  it('has no keys to tell when the roles are invalid', () => {
    for (const roles of [{}, { src: SIZE }, { src: -1 }, { src: 1.5 }, { src: '1' }]) {
      expect(OPS.broadcast.arrival(roles, SIZE), JSON.stringify(roles)).toBeUndefined();
    }
    expect(OPS.reduce.arrival({ src: 1 }, SIZE)).toBeUndefined();
    expect(OPS.send.arrival({ dst: 1, tag: -1 }, SIZE)).toBeUndefined();
    expect(OPS.recv.arrival({ src: 1 }, SIZE)).toBeUndefined();
  });

  it('names every op the status board can show, by one code each', () => {
    const names = Object.keys(OPS);
    expect(names.map(opCode)).toEqual(names.map((_, i) => i));
    expect(names.map((_, i) => opName(i))).toEqual(names);
    expect(opCode('noSuchOp')).toBe(-1);
  });

  it('covers every communication method of ThreadGroup', () => {
    const methods = Object.getOwnPropertyNames(ThreadGroup.prototype).filter(
      (m) =>
        m !== 'constructor' &&
        typeof Object.getOwnPropertyDescriptor(ThreadGroup.prototype, m)?.value === 'function',
    );
    // Methods built on others (their own calls go through the table under those names), and local ones.
    const composed = ['recvBorrowed', 'recvAnyBorrowed', 'batchIsendIrecv', 'sendObject', 'destroy'];
    const local = ['groupRank', 'globalRank', 'nodeOf', 'nodes', 'nodeMemory'];
    expect(methods.filter((m) => !composed.includes(m) && !local.includes(m)).sort()).toEqual(
      Object.keys(OPS).sort(),
    );
  });
});
