/**
 * NetworkTensorStore on loopback: several stores in this process, each its
 * own rank, connected over TCP as ranks on different nodes would be.
 */
import { createHook } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { dialerHandshake } from '../src/network-store/handshake.ts';
import {
  NetworkStoreHandshakeError,
  type NetworkStoreOptions,
  NetworkStoreProtocolError,
  NetworkTensorStore,
} from '../src/network-store/index.ts';
import { FRAME_LIMIT, Frame, MAX_STATUS_BYTES, valueHeaderFrame } from '../src/network-store/wire.ts';
import { FrameDecoder, FrameWriter } from '../src/rendezvous/protocol.ts';
import { CommTimeoutError, RankFailedError } from '../src/runtime/errors.ts';
import { registerDeviceBackend } from '../src/tensor/device.ts';
import type { DType } from '../src/tensor/dtype.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import { connectAll, listenOnLoopback, SECRET } from './fixtures/network-job.ts';

const HOST = '127.0.0.1';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const stores: NetworkTensorStore[] = [];
const sockets: net.Socket[] = [];
/** Connections the stores refused, in the order refused. */
let refusals: Error[] = [];
let jobs = 0;

afterEach(() => {
  for (const store of stores.splice(0)) store.close();
  for (const socket of sockets.splice(0)) socket.destroy();
  refusals = [];
});

async function listen(rank: number, jobId: string, options: Partial<NetworkStoreOptions> = {}) {
  const store = await listenOnLoopback(rank, jobId, {
    onRefused: (error) => refusals.push(error),
    ...options,
  });
  stores.push(store);
  return store;
}

const peerOf = (store: NetworkTensorStore) => ({ rank: store.rank, ...store.address });

/** A connected job of these ranks (0..n-1 for a number); options per rank. */
async function job(
  ranks: number | number[],
  options: (rank: number) => Partial<NetworkStoreOptions> = () => ({}),
): Promise<NetworkTensorStore[]> {
  const list = typeof ranks === 'number' ? Array.from({ length: ranks }, (_, r) => r) : ranks;
  const jobId = `job-${++jobs}`;
  const members = await Promise.all(list.map((rank) => listen(rank, jobId, options(rank))));
  await connectAll(members);
  return members;
}

function randomTensor(shape: number[], dtype: DType): Tensor {
  const t = Tensor.empty(shape, dtype);
  t.bytes().set(randomBytes(t.nbytes));
  return t;
}

const sameBytes = (a: Tensor, b: Tensor) => Buffer.from(a.bytes()).equals(Buffer.from(b.bytes()));

/** One value from `src` to `dst`, through all four steps; resolves to what `dst` got. */
async function pass(src: NetworkTensorStore, dst: NetworkTensorStore, key: string, tensor: Tensor) {
  await src.srcSet(key, tensor, 1, { to: [dst.rank] });
  const got = await dst.destGet(key, { from: src.rank });
  await dst.destFinishGet(key);
  await src.srcWaitUntilGetFinished(key);
  return got;
}

/** Resolves once `check` holds, polling after each `pause`; fails after `ms`. */
async function eventually(check: () => boolean, ms = 5000, pause = () => sleep(5)): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not reached');
    await pause();
  }
}

/**
 * The types of the resources of `types` created from now on and not yet destroyed;
 * `sleep` waits without its own timer counting, `stop()` ends the tracking.
 */
function trackResources(types: string[]): (() => string[]) & { sleep(): Promise<unknown>; stop(): void } {
  const alive = new Map<number, string>();
  const hook = createHook({
    init(id, type) {
      if (types.includes(type)) alive.set(id, type);
    },
    destroy(id) {
      alive.delete(id);
    },
  }).enable();
  const untracked = () => {
    hook.disable();
    const slept = sleep(5);
    hook.enable();
    return slept;
  };
  return Object.assign(() => [...alive.values()], { sleep: untracked, stop: () => void hook.disable() });
}

/** A connection to `port`; it drops what it reads unless `drain` is false (a handshake reads it). */
async function openSocket(port: number, drain = true): Promise<net.Socket> {
  const socket = net.connect(port, HOST);
  sockets.push(socket);
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  // Reading is what sees the end of the connection.
  if (drain) socket.resume();
  return socket;
}

const closed = (socket: net.Socket) =>
  socket.closed ? Promise.resolve() : new Promise<void>((resolve) => socket.once('close', () => resolve()));

describe('values', () => {
  it('land in the tensor the consumer names (landIn), in reads that cross values, and only there', async () => {
    const [a, b] = await job(2);
    // Values both sides of the small-value copy and of the read stage, several in flight at once.
    const sizes = [3, 5000, 16 << 10, 70_000, 1 << 20];
    const into = sizes.map((n) => Tensor.zeros([n], 'float32'));
    const sent = sizes.map((n) => randomTensor([n], 'float32'));
    for (const [i, t] of into.entries()) b.landIn(`land${i}`, t, { from: 0 });
    for (const [i, t] of sent.entries()) await a.srcSet(`land${i}`, t, 1, { to: [1] });
    for (const [i, t] of sent.entries()) {
      const got = await b.destGet(`land${i}`, { from: 0 });
      expect(got.data.buffer).toBe(into[i].data.buffer);
      expect(sameBytes(into[i], t)).toBe(true);
      await b.destFinishGet(`land${i}`);
      await a.srcWaitUntilGetFinished(`land${i}`);
    }
    // A value of another size and a cancelled wish arrive as usual.
    const other = Tensor.zeros([4], 'float32');
    b.landIn('other', other, { from: 0 });
    expect((await pass(a, b, 'other', randomTensor([5], 'float32'))).data.buffer).not.toBe(other.data.buffer);
    const cancelled = Tensor.zeros([1 << 20], 'float32');
    b.landIn('cancelled', cancelled, { from: 0 })();
    expect((await pass(a, b, 'cancelled', sent[4])).data.buffer).not.toBe(cancelled.data.buffer);
    // The finished landed value's memory was not kept as a spare: the next value of its size is elsewhere.
    const next = await pass(a, b, 'next', sent[4]);
    expect(next.data.buffer).not.toBe(into[4].data.buffer);
    expect(sameBytes(into[4], sent[4])).toBe(true);
  });

  it('a small value can be let go of at once (srcRelease); its consumer still takes it, and the key serves again', async () => {
    const [a, b] = await job(2);
    const small = Tensor.fromArray([1, 2, 3], [3], 'int32');
    await a.srcSet('rel', small, 1, { to: [1] });
    expect(a.srcRelease('rel')).toBe(true);
    // Released, not withdrawn: the consumer takes it, and its finish finds nobody.
    expect((await b.destGet('rel', { from: 0 })).toArray()).toEqual([1, 2, 3]);
    await b.destFinishGet('rel', { error: 'heard by nobody' });
    // The key can be set again at once, and this time the producer waits as usual.
    await a.srcSet('rel', Tensor.fromArray([4], [1], 'int32'), 1, { to: [1] });
    expect((await b.destGet('rel', { from: 0 })).toArray()).toEqual([4]);
    await b.destFinishGet('rel');
    await a.srcWaitUntilGetFinished('rel');
    // A large value is read from the producer's tensor as it is sent: it must be waited for.
    const big = randomTensor([1 << 16], 'float32');
    await a.srcSet('big', big, 1, { to: [1] });
    expect(a.srcRelease('big')).toBe(false);
    expect(sameBytes(await b.destGet('big', { from: 0 }), big)).toBe(true);
    await b.destFinishGet('big');
    await a.srcWaitUntilGetFinished('big');
    expect(a.srcRelease('never-set')).toBe(false);
  });

  it("a small value's finish, which waits for the end of the turn, still reaches its producer when the consumer closes at once", async () => {
    const [a, b] = await job(2);
    await a.srcSet('last', Tensor.fromArray([7], [1], 'int32'), 1, { to: [1] });
    expect((await b.destGet('last', { from: 0 })).toArray()).toEqual([7]);
    await b.destFinishGet('last');
    b.close();
    await a.srcWaitUntilGetFinished('last');
  });

  it("a small value's finish goes out before its consumer spins in a wait, not after it", async () => {
    const [a, b] = await job(2, () => ({ spin: true }));
    await a.srcSet('first', Tensor.fromArray([7], [1], 'int32'), 1, { to: [1] });
    await b.destGet('first', { from: 0 });
    await b.destFinishGet('first');
    const before = b.networkStats().sentBytes;
    // The wait spins within this call, holding the event loop: the finish, left for the end of the
    // turn, is written first (a peer spinning for it at the same time would spin out its whole time).
    const next = b.destGet('next', { from: 0 });
    expect(b.networkStats().sentBytes).toBeGreaterThan(before);
    await a.srcWaitUntilGetFinished('first');
    await a.srcSet('next', Tensor.fromArray([8], [1], 'int32'), 1, { to: [1] });
    expect((await next).toArray()).toEqual([8]);
    await b.destFinishGet('next');
    await a.srcWaitUntilGetFinished('next');
  });

  it('keep their order with many in flight, each key finding its own value', async () => {
    const [a, b] = await job(2);
    const n = 300;
    for (let i = 0; i < n; i++) {
      await a.srcSet(`k${i}`, Tensor.fromArray([i, 2 * i], [2], 'int32'), 1, { tag: `t${i}`, to: [1] });
    }
    // Taken out of order: each key finds its own value.
    for (const i of [n - 1, 0, 7]) {
      const e = await b.destGetEntry(`k${i}`, { from: 0 });
      expect([e.tag, ...e.tensor.toArray()]).toEqual([`t${i}`, i, 2 * i]);
    }
    for (let i = 1; i < n - 1; i++) {
      if (i === 7) continue;
      const e = await b.destGetEntry(`k${i}`, { from: 0 });
      expect([e.tag, ...e.tensor.toArray()]).toEqual([`t${i}`, i, 2 * i]);
    }
    for (let i = 0; i < n; i++) await b.destFinishGet(`k${i}`);
    for (let i = 0; i < n; i++) await a.srcWaitUntilGetFinished(`k${i}`);
  });

  it('keep their order behind a value the socket takes only in part: the rest waits in the stream, and so do they', async () => {
    const [a, b] = await job(2);
    // Far more than a loopback socket's buffers take at once.
    const large = Tensor.fromArray(
      Int32Array.from({ length: 8 << 20 }, (_, i) => i ^ 0x5a5a),
      [8 << 20],
      'int32',
    );
    // Set in one turn: the small ones are written while the large one's rest is still queued.
    const sets = [a.srcSet('large', large, 1, { to: [1] })];
    for (let i = 0; i < 20; i++)
      sets.push(a.srcSet(`small${i}`, Tensor.fromArray([i], [1], 'int32'), 1, { to: [1] }));
    await Promise.all(sets);
    const got = await b.destGet('large', { from: 0 });
    expect(Buffer.from(got.bytes()).equals(Buffer.from(large.bytes()))).toBe(true);
    for (let i = 0; i < 20; i++) expect((await b.destGet(`small${i}`, { from: 0 })).toArray()).toEqual([i]);
    for (const key of ['large', ...Array.from({ length: 20 }, (_, i) => `small${i}`)]) {
      await b.destFinishGet(key);
      await a.srcWaitUntilGetFinished(key);
    }
  });

  it('a value over the budget of buffered bytes is refused on both sides, and the budget frees as gets take values', async () => {
    const [a, b] = await job(2, (rank) => (rank === 1 ? { maxBufferedBytes: 1000 } : {}));
    await a.srcSet('first', Tensor.zeros([100], 'float64'), 1, { to: [1] });
    await a.srcSet('second', Tensor.zeros([100], 'float64'), 1, { to: [1] });
    const refused = await b.destGet('second', { from: 0 }).catch((e: Error) => e);
    expect((refused as Error).message).toMatch(
      /destGet\("second"\): rank 1 refused the value of key "second" from rank 0 \(800 bytes\): it holds 800 bytes of values no get took yet, and its maxBufferedBytes is 1000/,
    );
    await expect(a.srcWaitUntilGetFinished('second')).rejects.toThrow(
      /rank 1 refused the value of key "second"/,
    );
    await b.destGet('first', { from: 0 });
    await b.destFinishGet('first');
    await a.srcWaitUntilGetFinished('first');
    expect((await pass(a, b, 'third', Tensor.ones([100], 'float64'))).toArray()[99]).toBe(1);
  });

  it('a value over the consumer’s maxValueBytes is refused by the producer', async () => {
    const [a] = await job(2, (rank) => (rank === 1 ? { maxValueBytes: 100 } : {}));
    await expect(a.srcSet('k', Tensor.zeros([50], 'int32'), 1, { to: [1] })).rejects.toThrow(
      /srcSet\("k"\): the value has 200 bytes, over the maxValueBytes 100 of rank 1/,
    );
  });
});

describe('offered values (set without `to`)', () => {
  it('go to the peer that asks (pull), once, whether it asks before or after the set', async () => {
    const [a, b, c] = await job(3);
    const t = Tensor.fromArray([1, 2, 3], [3], 'int32');
    await a.srcSet('early', t, 1, { tag: 'v' });
    expect(a.claimed('early')).toBe(false);
    // A plain get waits for a push that never comes; a pull asks.
    await expect(b.destGet('early', { from: 0, timeoutMs: 50 })).rejects.toThrow(CommTimeoutError);
    const entry = await b.destGetEntry('early', { from: 0, pull: true });
    expect([entry.tensor.toArray(), entry.tag, entry.producerRank]).toEqual([[1, 2, 3], 'v', 0]);
    expect(a.claimed('early')).toBe(true);
    await b.destFinishGet('early');
    await a.srcWaitUntilGetFinished('early');
    // Asked before it is set: the ask waits at the producer (a look with timeout 0 asks, then finds it later).
    await expect(c.destGet('late', { from: 0, pull: true, timeoutMs: 0 })).rejects.toThrow(CommTimeoutError);
    await a.srcSet('late', t, 1);
    const late = await c.destGet('late', { from: 0, pull: true });
    expect(late.toArray()).toEqual([1, 2, 3]);
    await c.destFinishGet('late');
    await a.srcWaitUntilGetFinished('late');
    // One consumer: a second asker gets nothing.
    await a.srcSet('once', t, 1);
    await b.destGet('once', { from: 0, pull: true });
    await expect(c.destGet('once', { from: 0, pull: true, timeoutMs: 100 })).rejects.toThrow(
      CommTimeoutError,
    );
    await b.destFinishGet('once');
    await a.srcWaitUntilGetFinished('once');
    // Nobody asks: a zero wait withdraws it.
    await a.srcSet('unasked', t, 1);
    await expect(a.srcWaitUntilGetFinished('unasked', { timeoutMs: 0 })).rejects.toThrow(CommTimeoutError);
  });
});

describe('status rows', () => {
  it('reach every peer in order, between values; an oversized one is refused', async () => {
    const [a, b, c] = await job(3);
    const got: Array<[number, number, string]> = [];
    for (const store of [b, c]) {
      store.onPeerStatus = (rank, row) => got.push([store.rank, rank, new TextDecoder().decode(row)]);
    }
    a.shareStatus(new TextEncoder().encode('{"state":1}'));
    expect((await pass(a, b, 'k', Tensor.ones([3]))).toArray()).toEqual([1, 1, 1]);
    a.shareStatus(new TextEncoder().encode('{"state":2}'));
    await eventually(() => got.length === 4);
    expect(got.filter(([to]) => to === 1)).toEqual([
      [1, 0, '{"state":1}'],
      [1, 0, '{"state":2}'],
    ]);
    expect(got.filter(([to]) => to === 2).map(([, from]) => from)).toEqual([0, 0]);
    expect(() => a.shareStatus(new Uint8Array(MAX_STATUS_BYTES + 1))).toThrow(RangeError);
  });
});

describe('arguments', () => {
  it('missing from and a rank that is no peer are clear errors naming the key', async () => {
    const [a, b] = await job(2);
    const t = Tensor.zeros([2]);
    await expect(a.srcSet('k', t, 1, { to: [5] })).rejects.toThrow(
      /srcSet\("k"\): rank 5 is not a peer of rank 0/,
    );
    await expect(a.srcSet('k', t, 1, { to: [0] })).rejects.toThrow(/do not cross the network/);
    await expect(b.destGet('k')).rejects.toThrow(
      new TypeError('destGet("k"): the network store needs options.from, the global rank of the producer'),
    );
    // A failed call claims nothing: the key still works.
    expect((await pass(a, b, 'k', t)).shape).toEqual([2]);
  });

  it('a device tensor is refused: GPU tensors on different nodes go over NCCL', async () => {
    // Enough of a device backend to make a view on device memory; nothing reads it.
    const refuse = () => {
      throw new Error('not a real device');
    };
    registerDeviceBackend({ checkDevice: () => {}, allocate: refuse, copy: refuse, memset: refuse });
    const [a] = await job(2);
    const onDevice = Tensor.fromDevicePointer(0x1000n, 'cuda:0', [4], 'float32');
    await expect(a.srcSet('gpu', onDevice, 1, { to: [1] })).rejects.toThrow(
      new TypeError(
        'srcSet("gpu"): tensor float32[4] is on cuda:0; the network store carries host tensors (GPU tensors on different nodes go over NCCL)',
      ),
    );
  });

  it('before connect and after close, calls say so', async () => {
    const store = await listen(0, 'lonely');
    await expect(store.destGet('k', { from: 1 })).rejects.toThrow(/not connected to its peers yet/);
    store.close();
    store.close();
    await expect(store.srcSet('k', Tensor.zeros([1]), 0, { to: [] })).rejects.toThrow(
      /the network store of rank 0 is closed/,
    );
  });

  it('the secret is required', async () => {
    await expect(
      NetworkTensorStore.listen({ rank: 0, jobId: 'j', secret: undefined as unknown as string }),
    ).rejects.toThrow(/secret is required/);
  });
});

describe('timeouts', () => {
  it('name the key, the rank and what is known', async () => {
    const [a, b] = await job(2);
    const get = await b.destGet('absent', { from: 0, timeoutMs: 50 }).catch((e: Error) => e);
    expect(get).toBeInstanceOf(CommTimeoutError);
    expect((get as Error).message).toBe(
      'destGet("absent") timed out after 50 ms on rank 1: no value from rank 0 has arrived under this key',
    );
    await a.srcSet('unread', Tensor.fromArray([1], [1], 'float32'), 1, { to: [1] });
    const wait = await a.srcWaitUntilGetFinished('unread', { timeoutMs: 50 }).catch((e: Error) => e);
    expect(wait).toBeInstanceOf(CommTimeoutError);
    expect((wait as Error).message).toBe(
      'srcWaitUntilGetFinished("unread") timed out after 50 ms on rank 0: 0 of 1 consumers finished; waiting for rank 1 (value sent)',
    );
    // The producer gave up on that value and withdrew it: once the withdrawal is there (a value
    // sent after it on the same connection arrived), the consumer gets the key's next value.
    await pass(a, b, 'fence', Tensor.ones([1]));
    await a.srcSet('unread', Tensor.fromArray([2], [1], 'float32'), 1, { to: [1] });
    expect((await b.destGet('unread', { from: 0 })).toArray()).toEqual([2]);
    await expect(b.destGet('unread', { from: 0, timeoutMs: 0 })).rejects.toThrow(CommTimeoutError);
  });

  it('connect names the peers that never came, with their addresses', async () => {
    const gone = net.createServer();
    await new Promise<void>((resolve) => gone.listen(0, HOST, resolve));
    const deadPort = (gone.address() as net.AddressInfo).port;
    await new Promise((resolve) => gone.close(resolve));
    const store = await listen(1, 'half-job');
    const peers = [{ rank: 0, host: HOST, port: 9 }, peerOf(store), { rank: 2, host: HOST, port: deadPort }];
    const error = await store.connect(peers, { timeoutMs: 300 }).catch((e: Error) => e);
    expect(error).toBeInstanceOf(CommTimeoutError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `NetworkTensorStore.connect timed out after 300 ms on rank 1: 0 of 2 peers connected; ` +
          `rank 0 \\(${HOST}:9\\) did not connect; rank 2 at ${HOST}:${deadPort} could not be reached \\(.*ECONNREFUSED.*\\)`,
      ),
    );
  });

  it('connect waits for a peer that listens late', async () => {
    const first = await listen(0, 'late');
    const reserve = net.createServer();
    await new Promise<void>((resolve) => reserve.listen(0, HOST, resolve));
    const port = (reserve.address() as net.AddressInfo).port;
    await new Promise((resolve) => reserve.close(resolve));
    // Rank 1's address is known before it listens: rank 0 keeps dialing until it does.
    const connecting = first.connect([peerOf(first), { rank: 1, host: HOST, port }], { timeoutMs: 10_000 });
    await sleep(100);
    const late = await NetworkTensorStore.listen({ rank: 1, jobId: 'late', secret: SECRET });
    stores.push(late);
    // It took another port than the one announced; redirect the announced one to it.
    const relay = net.createServer((socket) => {
      const upstream = net.connect(late.address.port, HOST);
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
      sockets.push(socket, upstream);
    });
    await new Promise<void>((resolve) => relay.listen(port, HOST, resolve));
    try {
      await Promise.all([connecting, late.connect([peerOf(first), peerOf(late)], { timeoutMs: 10_000 })]);
      expect((await pass(first, late, 'k', Tensor.ones([3]))).toArray()).toEqual([1, 1, 1]);
    } finally {
      for (const s of stores.splice(0)) s.close();
      for (const s of sockets.splice(0)) s.destroy();
      await new Promise((resolve) => relay.close(resolve));
    }
  });
});

describe('strangers', () => {
  it('a wrong secret, another job, a duplicate rank and a rank not in the job are refused; the job goes on', async () => {
    const [r1, r2] = await job([1, 2]);
    const attempt = async (rank: number, options: Partial<NetworkStoreOptions> & { jobId: string }) => {
      const impostor = await listen(rank, options.jobId, options);
      const error = await impostor
        .connect([peerOf(impostor), peerOf(r2)], { timeoutMs: 5000 })
        .catch((e: Error) => e);
      expect(error).toBeInstanceOf(NetworkStoreHandshakeError);
      return (error as Error).message;
    };
    const jobId = `job-${jobs}`;
    expect(await attempt(0, { jobId, secret: 'not-the-secret-of-this-job' })).toMatch(
      /rank 0: the handshake with rank 2 at .* failed: rank 2 refused the connection: it failed authentication/,
    );
    expect(await attempt(0, { jobId: 'another-job' })).toMatch(
      /it belongs to job "another-job", not this one/,
    );
    expect(await attempt(1, { jobId })).toMatch(/rank 1 is already connected/);
    expect(await attempt(0, { jobId })).toMatch(/rank 0 is not among the peers of rank 2/);
    expect(refusals.map((e) => e.message)).toEqual([
      expect.stringMatching(
        /^rank 2 refused a connection from .* \(claiming rank 0\): it failed authentication$/,
      ),
      expect.stringMatching(/another-job/),
      expect.stringMatching(/rank 1 is already connected/),
      expect.stringMatching(/not among the peers/),
    ]);
    expect((await pass(r1, r2, 'k', Tensor.ones([2]))).toArray()).toEqual([1, 1]);
  });

  it('garbage, a port scanner and a silent socket are refused without disturbing a value in flight', async () => {
    const [a, b] = await job(2, () => ({ handshakeTimeoutMs: 200 }));
    const pending = b.destGet('k', { from: 0 });
    const garbage = await openSocket(b.address.port);
    garbage.write('GET / HTTP/1.1\r\nHost: example\r\n\r\n');
    const framedNoise = await openSocket(b.address.port);
    framedNoise.write(new FrameWriter(Frame.join).raw(randomBytes(1000)).finish());
    const scanner = await openSocket(b.address.port);
    scanner.destroy();
    const silent = await openSocket(b.address.port);
    await Promise.all([closed(garbage), closed(framedNoise), closed(silent)]);
    await eventually(() => refusals.length === 4);
    expect(refusals.map((e) => e.message)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^rank 1 refused a connection from .*: frame of \d+ bytes exceeds the limit of 4096$/,
        ),
        expect.stringMatching(/: no handshake within 200 ms$/),
        expect.stringMatching(/: not a tensorcomm network store peer$/),
        expect.stringMatching(/: the connection closed during the handshake$/),
      ]),
    );
    await a.srcSet('k', Tensor.fromArray([5], [1], 'int32'), 1, { to: [1] });
    expect((await pending).toArray()).toEqual([5]);
    await b.destFinishGet('k');
    await a.srcWaitUntilGetFinished('k');
  });
});

describe('failures', () => {
  /** Rank 0 played by the test: it passes the handshake with ranks 1 and 2, then writes what it likes. */
  async function jobWithFakeRank0() {
    const jobId = `job-${++jobs}`;
    const [r1, r2] = await Promise.all([listen(1, jobId), listen(2, jobId)]);
    const peers = [{ rank: 0, host: HOST, port: 9 }, peerOf(r1), peerOf(r2)];
    const connecting = Promise.all([r1.connect(peers), r2.connect(peers)]);
    const fake = async (to: NetworkTensorStore) => {
      const socket = await openSocket(to.address.port, false);
      const local = { jobId, secret: SECRET, rank: 0, maxValueBytes: 1 << 20 };
      const address = `${HOST}:${to.address.port}`;
      await dialerHandshake(socket, new FrameDecoder(FRAME_LIMIT), local, { rank: to.rank, address }, 5000);
      socket.resume();
      return socket;
    };
    const [to1, to2] = await Promise.all([fake(r1), fake(r2)]);
    await connecting;
    return { r1, r2, to1, to2 };
  }

  it('a malformed frame from an authenticated peer fails the waits that involve it, and only those', async () => {
    const { r1, r2, to1 } = await jobWithFakeRank0();
    // The fake speaks the protocol: a well-formed value goes through.
    const good = Tensor.fromArray([1, 2], [2], 'int16');
    to1.write(valueHeaderFrame(0, 'good', new Uint8Array(), good));
    to1.write(good.bytes());
    expect((await r1.destGet('good', { from: 0 })).toArray()).toEqual([1, 2]);

    const pendingGet = r1.destGet('next', { from: 0 }).catch((e: Error) => e);
    await r1.srcSet('out', Tensor.ones([1]), 2, { to: [0, 2] });
    const pendingFinish = r1.srcWaitUntilGetFinished('out').catch((e: Error) => e);
    await r2.destGet('out', { from: 1 });
    const told = closed(to1);
    to1.write(
      new FrameWriter(Frame.value).u32(1).key('next').bytes(new Uint8Array()).u8(99).u8(0).f64(8).finish(),
    );
    for (const error of [await pendingGet, await pendingFinish]) {
      expect(error).toBeInstanceOf(NetworkStoreProtocolError);
      expect(error).toBeInstanceOf(RankFailedError);
      expect((error as RankFailedError).failedRank).toBe(0);
      expect((error as Error).message).toMatch(
        /on rank 1: rank 0 sent a malformed frame: value of key "next" has unknown dtype code 99; rank 1 closed its connection to it/,
      );
    }
    await told;
    await expect(r1.destGet('later', { from: 0 })).rejects.toThrow(/rank 0 sent a malformed frame/);
    await expect(r1.srcSet('later', Tensor.ones([1]), 1, { to: [0] })).rejects.toThrow(
      NetworkStoreProtocolError,
    );
    // Ranks 1 and 2 are not disturbed.
    await r2.destFinishGet('out');
    expect((await pass(r2, r1, 'k', Tensor.ones([2]))).toArray()).toEqual([1, 1]);
  });

  it('a status row declared over the limit is a malformed frame', async () => {
    const { r1, to1 } = await jobWithFakeRank0();
    const pendingGet = r1.destGet('next', { from: 0 }).catch((e: Error) => e);
    to1.write(new FrameWriter(Frame.status).u32(MAX_STATUS_BYTES + 1).finish());
    const error = await pendingGet;
    expect(error).toBeInstanceOf(NetworkStoreProtocolError);
    expect((error as Error).message).toMatch(
      /rank 0 sent a malformed frame: status row of \d+ bytes exceeds the limit/,
    );
  });

  it('a 38-byte value header declaring 64 GiB is a malformed frame naming the peer, refused before allocating', async () => {
    const { r1, to1 } = await jobWithFakeRank0();
    const pendingGet = r1.destGet('huge', { from: 0 }).catch((e: Error) => e);
    const huge = 64 * 2 ** 30;
    const rss = process.memoryUsage().rss;
    const header = new FrameWriter(Frame.value).u32(1).key('huge').bytes(new Uint8Array()).u8(8).u8(1);
    to1.write(header.f64(huge).f64(huge).finish());
    const error = await pendingGet;
    expect(error).toBeInstanceOf(NetworkStoreProtocolError);
    expect((error as RankFailedError).failedRank).toBe(0);
    expect((error as Error).message).toMatch(
      /rank 0 sent a malformed frame: value of key "huge" has 68719476736 bytes, over this rank's maxValueBytes \d+; rank 1 closed its connection to it/,
    );
    expect(process.memoryUsage().rss - rss).toBeLessThan(256 * 2 ** 20);
  });

  it('a peer that closes fails the waits that involve it with RankFailedError, and only those', async () => {
    const [r0, r1, r2] = await job(3);
    const pendingGet = r1.destGet('a', { from: 0 }).catch((e: Error) => e);
    await r1.srcSet('b', Tensor.ones([4]), 2, { to: [0, 2] });
    await r2.destGet('b', { from: 1 });
    await r2.destFinishGet('b');
    const pendingFinish = r1.srcWaitUntilGetFinished('b').catch((e: Error) => e);
    const unrelated = r2.destGet('c', { from: 1 });
    r0.close();
    for (const error of [await pendingGet, await pendingFinish]) {
      expect(error).toBeInstanceOf(RankFailedError);
      expect((error as RankFailedError).failedRank).toBe(0);
      expect((error as Error).message).toMatch(/on rank 1: rank 0 lost its connection to rank 1/);
    }
    await expect(r1.destGet('later', { from: 0 })).rejects.toThrow(/rank 0 lost its connection/);
    await expect(r1.srcSet('later', Tensor.ones([1]), 1, { to: [0] })).rejects.toThrow(RankFailedError);
    await r1.srcSet('c', Tensor.fromArray([3], [1], 'int32'), 1, { to: [2] });
    expect((await unrelated).toArray()).toEqual([3]);
    await r2.destFinishGet('c');
    await r1.srcWaitUntilGetFinished('c');
  });

  it('values that arrived whole are still taken after their producer closed; later ones fail', async () => {
    const [a, b] = await job(2);
    // The producer lets go of its last values and closes at once, as a rank does after its last allReduce.
    await a.srcSet('last', Tensor.fromArray([5], [1], 'int32'), 1, { to: [1] });
    expect(a.srcRelease('last')).toBe(true);
    await a.srcSet('big', Tensor.full([1 << 16], 2, 'float32'), 1, { to: [1] });
    // Values arrive in order: once the later one is here, so is the first.
    expect((await b.destGet('big', { from: 0 })).toArray()[0]).toBe(2);
    a.close();
    // Once the consumer has seen the connection end, a value that never came fails, one that came does not.
    await expect(b.destGet('never', { from: 0 })).rejects.toThrow(/rank 0 lost its connection/);
    expect((await b.destGet('last', { from: 0 })).toArray()).toEqual([5]);
    await b.destFinishGet('last');
    await b.destFinishGet('big');
  });

  it('close rejects pending waits, and leaves no socket, server or timer behind', async () => {
    // Only what this test creates counts: earlier tests' sockets and timers end on their own schedule.
    const live = trackResources(['TCPWRAP', 'TCPSERVERWRAP', 'Timeout']);
    try {
      const [a, b] = await job(2);
      await pass(a, b, 'k', Tensor.ones([1000]));
      const pending = b.destGet('never', { from: 0 }).catch((e: Error) => e);
      await a.srcSet('unread', Tensor.ones([4]), 1, { to: [1] });
      const unfinished = a.srcWaitUntilGetFinished('unread').catch((e: Error) => e);
      const ports = [a.address.port, b.address.port];
      expect(live()).toContain('TCPSERVERWRAP');
      expect(live()).toContain('TCPWRAP');
      a.close();
      b.close();
      expect((await pending) as Error).toBeInstanceOf(Error);
      expect(((await pending) as Error).message).toMatch(
        /destGet\("never"\): the network store of rank 1 is closed/,
      );
      expect(((await unfinished) as Error).message).toMatch(/the network store of rank 0 is closed/);
      await eventually(() => live().length === 0, 5000, live.sleep).catch(() => expect(live()).toEqual([]));
      for (const port of ports) {
        const refused = await new Promise<string>((resolve) => {
          const probe = net.connect(port, HOST);
          probe.on('connect', () => {
            probe.destroy();
            resolve('connected');
          });
          probe.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
        });
        expect(refused).toBe('ECONNREFUSED');
      }
    } finally {
      live.stop();
    }
  });
});
