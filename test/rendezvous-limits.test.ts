/**
 * The rendezvous server under a peer that tries to make it hold memory:
 * floods of huge partial frames, too many connections, silent and dribbling
 * connections, sets past the store's cap. Each is bounded or closed, and
 * well-behaved clients go on working.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import {
  RendezvousClient,
  RendezvousError,
  RendezvousServer,
  type RendezvousServerOptions,
} from '../src/index.ts';
import { FrameType, FrameWriter, Op } from '../src/rendezvous/protocol.ts';
import { scriptStart } from './fixtures/node-script.ts';
import type { ServerReport, ServerScenario } from './fixtures/rendezvous-limits.ts';
import { type RawPeer, rawPeer, requestHead, until, within } from './fixtures/rendezvous-peer.ts';

const MiB = 1024 * 1024;
const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const servers: RendezvousServer[] = [];
const clients: RendezvousClient[] = [];
const peers: RawPeer[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const p of peers.splice(0)) p.socket.destroy();
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function startServer(options: RendezvousServerOptions): Promise<RendezvousServer> {
  const server = await RendezvousServer.start({ onConnectionError: () => {}, secret: undefined, ...options });
  servers.push(server);
  return server;
}

async function connect(port: number): Promise<RendezvousClient> {
  const client = await RendezvousClient.connect({ host: '127.0.0.1', port, timeoutMs: 10_000 });
  clients.push(client);
  return client;
}

async function peer(port: number): Promise<RawPeer> {
  const p = await rawPeer(port);
  peers.push(p);
  return p;
}

const serverScript = scriptStart(new URL('./fixtures/rendezvous-limits.ts', import.meta.url).pathname);

/** A rendezvous server in a child process of its own, whose memory is its alone. */
async function serverProcess(scenario: ServerScenario) {
  const { path, execArgv } = await serverScript;
  const child = fork(path, [scenario], {
    execArgv,
    env: { ...process.env, TENSORCOMM_RENDEZVOUS_SECRET: '' },
  });
  children.push(child);
  const next = () =>
    new Promise<ServerReport>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('the server process did not report within 20 s')),
        20_000,
      );
      child.once('message', (m) => {
        clearTimeout(timer);
        resolve(m as ServerReport);
      });
    });
  const first = await next();
  return {
    port: first.port,
    first,
    report: () => {
      const reply = next();
      child.send('report');
      return reply;
    },
  };
}

describe('rendezvous server limits', () => {
  it('a flood of huge partial frames keeps the server process under a memory bound; extra connections are refused and stalled ones closed', async () => {
    const server = await serverProcess('flood');
    const base = server.first.rss;

    // 12 connections are allowed from one address (maxConnectionsPerAddress: 12): the 13th and 14th are refused.
    const accepted = await Promise.all(Array.from({ length: 12 }, () => peer(server.port)));
    for (const p of accepted) expect(p.frames[0][0]).toBe(FrameType.serverHello);
    for (const p of accepted) p.hello();
    await until(() => accepted.every((p) => p.frames.length >= 2), 'welcomes');
    const refused = [await peer(server.port), await peer(server.port)];
    for (const p of refused) {
      expect(await within(p.closed, 5000)).toBe(true);
      expect(p.fatal()).toMatch(
        /too many connections from 127\.0\.0\.1: it holds 12, the limit \(maxConnectionsPerAddress\) is 12/,
      );
    }

    // Ten send most of a compareSet frame of 16 MiB (two values at the 8 MiB limit) and stop.
    const [idle, dribbler, ...flooders] = accepted;
    const declared = 6 + 3 + 2 * (4 + 8 * MiB);
    const body = Buffer.alloc(15 * MiB, 0x55);
    for (const p of flooders) {
      p.socket.write(requestHead(Op.compareSet, declared));
      p.socket.write(body);
    }
    // One dribbles a small set, a byte every 100 ms: small frames pass the large ones waiting for the budget,
    // so its frame's time runs, and it is closed for it.
    dribbler.socket.write(requestHead(Op.set, 200));
    const drip = setInterval(() => dribbler.socket.write(Buffer.of(0)), 100);
    try {
      let peak = 0;
      let peakBuffered = 0;
      // Sampled before the first frame times out (1.5 s), so no dropped frame's garbage is counted.
      for (let i = 0; i < 4; i++) {
        await sleep(250);
        const r = await server.report();
        peak = Math.max(peak, r.rss - base);
        peakBuffered = Math.max(peakBuffered, r.bufferedBytes);
      }
      // Without a frame budget the ten partial frames alone hold 150 MiB (measured: +182 MiB); with it at
      // most two arrive at once (measured: +31 MiB).
      expect(peakBuffered).toBeLessThanOrEqual(34 * MiB);
      expect(peak).toBeLessThan(80 * MiB);

      expect(await within(idle.closed, 5000)).toBe(true);
      expect(idle.fatal()).toMatch(/idle for 1000 ms \(idleTimeoutMs\) with no call pending/);
      expect(await within(dribbler.closed, 5000)).toBe(true);
      expect(dribbler.fatal()).toMatch(
        /a frame of 200 bytes did not arrive whole within 1500 ms \(frameTimeoutMs\)/,
      );
      // The flooders get their turn two at a time, and each is closed when its frame's time is up.
      expect(await within(Promise.all(flooders.map((p) => p.closed)), 20_000)).toBe(true);
      for (const p of flooders) expect(p.fatal()).toMatch(/did not arrive whole within 1500 ms/);
    } finally {
      clearInterval(drip);
    }
    const after = await server.report();
    expect(after.bufferedBytes).toBe(0);
    expect(after.connections).toBe(0);

    // The server goes on serving.
    const client = await connect(server.port);
    await client.set('still', 'here');
    expect(text(await client.get('still'))).toBe('here');
  }, 60_000);

  it('at the connection cap, unfinished handshakes of a stranger make way for a client that handshakes', async () => {
    const server = await startServer({ maxConnectionsPerAddress: 3 });
    const strangers = [await peer(server.port), await peer(server.port), await peer(server.port)];
    const client = await connect(server.port);
    await client.set('in', 'yes');
    expect(await within(strangers[0].closed, 3000)).toBe(true);
    expect(strangers[0].fatal()).toMatch(
      /still in the handshake when 127\.0\.0\.1 reached its limit of 3 connections/,
    );
    expect(server.connectionCount).toBe(3);
    // Connections past the handshake are never evicted: with three of them, the next is refused.
    for (const p of strangers.slice(1)) p.hello();
    await until(() => strangers.slice(1).every((p) => p.frames.length >= 2), 'welcomes');
    const late = await RendezvousClient.connect({
      host: '127.0.0.1',
      port: server.port,
      timeoutMs: 5000,
    }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(RendezvousError);
    expect((late as Error).message).toMatch(/too many connections from 127\.0\.0\.1: it holds 3/);
    expect(text(await client.get('in'))).toBe('yes');
  });

  it('a set past maxStoredBytes is refused with an error naming the cap; nothing stored is lost, and freed room can be used again', async () => {
    const server = await startServer({ maxStoredBytes: MiB });
    const a = await connect(server.port);
    const big = new Uint8Array(600 * 1024).fill(7);
    await a.set('a', big);
    const error = await a.set('b', big).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RendezvousError);
    expect((error as Error).message).toMatch(
      /set\('b'\) failed: set\('b'\) refused: the rendezvous store holds \d+ bytes and this needs \d+ more, over its cap of 1048576 bytes \(maxStoredBytes\); nothing was changed/,
    );
    expect(server.storedBytes).toBeLessThanOrEqual(MiB);
    // The refusal is an answer, not a dropped connection; what was stored stays.
    expect(await a.check(['b'])).toBe(false);
    expect(Buffer.from(await a.get('a')).equals(Buffer.from(big))).toBe(true);
    await a.set('a', new Uint8Array(600 * 1024).fill(8)); // replacing a value counts only the difference
    await expect(a.compareSet('c', '', big)).rejects.toThrow(/maxStoredBytes/);
    // A value stays after its client leaves, but counts until it is deleted.
    a.close();
    const b = await connect(server.port);
    expect((await b.get('a'))[0]).toBe(8);
    expect(await b.delete('a')).toBe(true);
    await b.set('b', big);
    expect(text(await b.compareSet('k', '', 'v'))).toBe('v');
  });

  it('parked waits count against maxStoredBytes while parked, and a connection that leaves takes them with it', async () => {
    const server = await startServer({ maxStoredBytes: 48 * 1024 });
    const a = await connect(server.port);
    const stored = server.storedBytes;
    const keys = Array.from({ length: 1000 }, (_, i) => `a-long-key-name-for-the-cap-${i}`);
    // Each wait holds about 37 KB of keys while parked: the first fits, the second would pass the cap.
    const parked = a.wait(keys, { timeoutMs: 10_000 }).catch((e: Error) => e);
    const refused = await a.wait(keys, { timeoutMs: 10_000 }).catch((e: Error) => e);
    expect(refused).toBeInstanceOf(RendezvousError);
    expect((refused as Error).message).toMatch(
      /wait for 1000 key\(s\) refused: .*over its cap of 49152 bytes \(maxStoredBytes\)/,
    );
    expect(server.storedBytes).toBeGreaterThan(stored);
    a.close();
    expect(await parked).toBeInstanceOf(RendezvousError);
    await until(() => server.storedBytes === stored, 'parked waits released');
  });

  it('a request announcing more than its op may carry is refused before its body is buffered', async () => {
    const dropped: string[] = [];
    const server = await startServer({
      maxValueBytes: 1024,
      onConnectionError: (e) => dropped.push(e.message),
    });
    const p = await peer(server.port);
    p.hello();
    await until(() => p.frames.length >= 2, 'welcome');
    // Within the frame limit (a compareSet may carry two values) but over what a set may carry.
    p.socket.write(requestHead(Op.set, 6000));
    expect(await within(p.closed, 2000)).toBe(true);
    expect(p.fatal()).toMatch(
      /a set request of 6000 bytes exceeds the limit of 5132 \(maxKeyBytes 4096, maxValueBytes 1024\)/,
    );
    expect(dropped[0]).toMatch(/\(rank 7\)/);
  });

  it('a silent connection is closed after idleTimeoutMs; a RendezvousClient that is merely quiet keeps its connection by pinging', async () => {
    const server = await startServer({ idleTimeoutMs: 300 });
    const quiet = await connect(server.port);
    const silent = await peer(server.port);
    silent.hello();
    expect(await within(silent.closed, 3000)).toBe(true);
    expect(silent.fatal()).toMatch(/idle for 300 ms/);
    await sleep(1000);
    await quiet.set('k', 'v');
    expect(text(await quiet.get('k'))).toBe('v');
    // A call parked on the server is not idleness, however long it waits.
    const other = await connect(server.port);
    const got = quiet.get('later', { timeoutMs: 10_000 });
    await sleep(800);
    await other.set('later', 'x');
    expect(text(await got)).toBe('x');
  });

  it('a peer that stops reading its replies is closed after idleTimeoutMs, and the others are served', async () => {
    const dropped: string[] = [];
    const server = await startServer({
      idleTimeoutMs: 500,
      onConnectionError: (e) => dropped.push(e.message),
    });
    const writer = await connect(server.port);
    await writer.set('v', new Uint8Array(MiB));
    const p = await peer(server.port);
    p.hello();
    await until(() => p.frames.length >= 2, 'welcome');
    p.socket.pause(); // reads nothing more
    const get = new FrameWriter(FrameType.request).u8(Op.get).u32(1).key('v').u32(1000).finish();
    p.socket.write(Buffer.concat(Array.from({ length: 200 }, () => get)));
    await until(() => dropped.length > 0, 'the server gave up on the peer', 10_000);
    expect(dropped[0]).toMatch(/\(rank 7\).*it read none of its replies for 500 ms/);
    expect(text(await writer.get('v')).length).toBeGreaterThan(0);
  });

  it('large sets from several clients at once all land when the frame budget holds one at a time', async () => {
    const server = await startServer({ maxValueBytes: 4 * MiB, maxBufferedBytes: 9 * MiB });
    const many = await Promise.all(Array.from({ length: 4 }, () => connect(server.port)));
    const value = (i: number) => new Uint8Array(4 * MiB - 64).fill(i + 1);
    await Promise.all(many.map((c, i) => c.set(`v${i}`, value(i))));
    for (let i = 0; i < many.length; i++) expect((await many[0].get(`v${i}`))[1000]).toBe(i + 1);
    expect(server.bufferedBytes).toBe(0);
  });

  it('refuses limits that contradict each other', async () => {
    await expect(startServer({ maxValueBytes: 8 * MiB, maxBufferedBytes: MiB })).rejects.toThrow(
      /maxBufferedBytes 1048576 is smaller than the largest frame the key and value limits allow/,
    );
    await expect(startServer({ idleTimeoutMs: 0 })).rejects.toThrow(
      /idleTimeoutMs must be an integer from 1/,
    );
  });
});
