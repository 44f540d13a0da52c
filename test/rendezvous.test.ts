import { spawn } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CommTimeoutError,
  RendezvousAuthError,
  RendezvousClient,
  type RendezvousClientOptions,
  RendezvousError,
  RendezvousServer,
  type RendezvousServerOptions,
  RendezvousTimeoutError,
} from '../src/index.ts';
import { rendezvousSecretFromEnv } from '../src/rendezvous/auth.ts';
import { FrameType, FrameWriter, PROTOCOL_MAGIC, PROTOCOL_VERSION } from '../src/rendezvous/protocol.ts';
import { rawPeer as openRawPeer, type RawPeer } from './fixtures/rendezvous-peer.ts';

const SECRET = 'a-shared-secret-of-some-length';
const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Servers and clients a test opened; closed after it whatever happened. */
const servers: RendezvousServer[] = [];
const clients: RendezvousClient[] = [];
const sockets: net.Socket[] = [];
let savedSecret: string | undefined;

beforeEach(() => {
  savedSecret = process.env.TENSORCOMM_RENDEZVOUS_SECRET;
  delete process.env.TENSORCOMM_RENDEZVOUS_SECRET;
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => s.close()));
  if (savedSecret === undefined) delete process.env.TENSORCOMM_RENDEZVOUS_SECRET;
  else process.env.TENSORCOMM_RENDEZVOUS_SECRET = savedSecret;
});

async function startServer(options: RendezvousServerOptions = {}): Promise<RendezvousServer> {
  const server = await RendezvousServer.start({ onConnectionError: () => {}, ...options });
  servers.push(server);
  return server;
}

async function connect(
  server: RendezvousServer,
  options: Partial<RendezvousClientOptions> = {},
): Promise<RendezvousClient> {
  const client = await RendezvousClient.connect({
    host: server.host,
    port: server.port,
    timeoutMs: 10_000,
    ...options,
  });
  clients.push(client);
  return client;
}

/** Tracks whether a promise settled yet, without an unhandled rejection. */
function track<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return { promise, settled: () => settled };
}

/** A raw peer (test/fixtures/rendezvous-peer.ts), destroyed after the test. */
async function rawPeer(host: string, port: number): Promise<RawPeer> {
  const peer = await openRawPeer(port, host);
  sockets.push(peer.socket);
  return peer;
}

/** A non-loopback address of this machine, or 0.0.0.0 (also non-loopback for the secret rule). */
function nonLoopbackAddress(): { bind: string; connect: string } {
  for (const addresses of Object.values(os.networkInterfaces())) {
    for (const a of addresses ?? []) {
      if (a.family === 'IPv4' && !a.internal) return { bind: a.address, connect: a.address };
    }
  }
  return { bind: '0.0.0.0', connect: '127.0.0.1' };
}

describe('RendezvousServer and RendezvousClient', () => {
  it('set/get/check/delete/add round-trip bytes and strings', async () => {
    const server = await startServer();
    expect(server.host).toBe('127.0.0.1');
    expect(server.port).toBeGreaterThan(0);
    const a = await connect(server, { rank: 0 });
    const b = await connect(server, { rank: 1 });
    await a.set('job', 'job-42');
    await a.set('blob', Uint8Array.of(0, 255, 7));
    expect(text(await b.get('job'))).toBe('job-42');
    expect([...(await b.get('blob'))]).toEqual([0, 255, 7]);
    expect(await b.check(['job', 'blob'])).toBe(true);
    expect(await b.check(['job', 'nope'])).toBe(false);
    expect(await b.delete('job')).toBe(true);
    expect(await b.delete('job')).toBe(false);
    expect(await a.check(['job'])).toBe(false);
    expect(await a.add('n', 5)).toBe(5);
    expect(await b.add('n', -2)).toBe(3);
    expect(text(await a.get('n'))).toBe('3'); // counters read as decimal text, as in c10d
    await a.set('word', 'x');
    await expect(a.add('word', 1)).rejects.toThrow(/add\('word'\).*not an integer/);
  });

  it('get and wait block until another client sets the keys', async () => {
    const server = await startServer();
    const waiter = await connect(server, { rank: 1 });
    const setter = await connect(server, { rank: 0 });
    const got = track(waiter.get('id'));
    const waited = track(waiter.wait(['x', 'y']));
    await sleep(100);
    expect(got.settled()).toBe(false);
    await setter.set('id', 'nccl-unique-id');
    expect(text(await got.promise)).toBe('nccl-unique-id');
    await setter.set('x', '1');
    await sleep(100);
    expect(waited.settled()).toBe(false); // 'y' is still missing
    await setter.set('y', '2');
    await waited.promise;
  });

  it('add from many clients at once is atomic', async () => {
    const server = await startServer();
    const many = await Promise.all(Array.from({ length: 8 }, (_, rank) => connect(server, { rank })));
    const results = await Promise.all(
      many.flatMap((c) => Array.from({ length: 50 }, () => c.add('count', 1))),
    );
    expect(results.sort((x, y) => x - y)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
    expect(await many[0].add('count', 0)).toBe(400);
  });

  it('compareSet follows c10d: sets on match or on a missing key with empty expected', async () => {
    const server = await startServer();
    const c = await connect(server);
    // missing key, non-empty expected: nothing is set, expected comes back
    expect(text(await c.compareSet('k', 'old', 'new'))).toBe('old');
    expect(await c.check(['k'])).toBe(false);
    // missing key, empty expected: desired is set
    expect(text(await c.compareSet('k', '', 'first'))).toBe('first');
    // mismatch: current value comes back, unchanged
    expect(text(await c.compareSet('k', 'wrong', 'second'))).toBe('first');
    expect(text(await c.get('k'))).toBe('first');
    // match: swapped
    expect(text(await c.compareSet('k', 'first', Uint8Array.of(1, 2)))).toBe('\u0001\u0002');
    expect([...(await c.get('k'))]).toEqual([1, 2]);
  });

  it('a get that times out names the key and the rank; a wait names only the keys still missing', async () => {
    const server = await startServer();
    const c = await connect(server, { rank: 3 });
    const started = performance.now();
    const error = await c.get('never', { timeoutMs: 300 }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(RendezvousTimeoutError);
    expect(error).toBeInstanceOf(CommTimeoutError);
    expect((error as Error).message).toMatch(
      /^rank 3 timed out after 300 ms in get\('never'\).*key\(s\) 'never'/,
    );
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(5000);

    await c.set('here', '1');
    const waitError = (await c
      .wait(['here', 'absent'], { timeoutMs: 200 })
      .catch((e) => e)) as RendezvousTimeoutError;
    expect(waitError).toBeInstanceOf(RendezvousTimeoutError);
    expect(waitError.missing).toEqual(['absent']);
    expect(waitError.message).toMatch(/waiting for rendezvous key\(s\) 'absent'$/);
    // the connection is still usable after a timeout
    expect(text(await c.get('here'))).toBe('1');
  });

  it('barrier releases only when every client arrived, is reusable by name, and names missing ranks on timeout', async () => {
    const server = await startServer();
    const ranks = await Promise.all([0, 1, 2, 3].map((rank) => connect(server, { rank })));
    for (let round = 0; round < 2; round++) {
      const early = ranks.slice(0, 3).map((c) => track(c.barrier('start', 4)));
      await sleep(100);
      expect(early.some((b) => b.settled())).toBe(false);
      await ranks[3].barrier('start', 4);
      await Promise.all(early.map((b) => b.promise));
    }
    const error = (await ranks[1]
      .barrier('late', 4, { timeoutMs: 200 })
      .catch((e) => e)) as RendezvousTimeoutError;
    expect(error).toBeInstanceOf(RendezvousTimeoutError);
    expect(error.message).toMatch(
      /^rank 1 timed out after 200 ms in barrier\('late'\) of 4 .*: 1 arrived; missing ranks 0, 2, 3$/,
    );
    expect(error.missing).toEqual(['0', '2', '3']);
  });

  it('barrier callers that disagree on worldSize all fail', async () => {
    const server = await startServer();
    const [a, b] = await Promise.all([0, 1].map((rank) => connect(server, { rank })));
    const first = a.barrier('b', 3).catch((e: Error) => e);
    await sleep(50);
    await expect(b.barrier('b', 2)).rejects.toThrow(/rank 1 passed worldSize 2 but rank 0 passed 3/);
    expect(((await first) as Error).message).toMatch(/barrier 'b' failed: rank 1 passed worldSize 2/);
  });

  it('refuses an oversized frame by dropping that connection, and keeps serving the others', async () => {
    const dropped: RendezvousError[] = [];
    const server = await startServer({ maxValueBytes: 1024, onConnectionError: (e) => dropped.push(e) });
    const good = await connect(server);
    await good.set('k', 'v');

    // client side: a value over the server's announced limit never leaves the client
    await expect(good.set('big', new Uint8Array(2048))).rejects.toThrow(
      /value for rendezvous key 'big' is 2048 bytes; the server accepts at most 1024/,
    );

    // before the handshake: a 1 GiB length prefix
    const early = await rawPeer(server.host, server.port);
    early.socket.write(Buffer.from([0x40, 0, 0, 0]));
    await early.closed;
    expect(dropped[0].message).toMatch(/frame of 1073741824 bytes exceeds the limit/);

    // after the handshake: a length prefix over the frame limit, then a well-sized set with a too-large value
    const late = await rawPeer(server.host, server.port);
    late.hello();
    late.socket.write(Buffer.from([0x10, 0, 0, 0]));
    await late.closed;
    expect(dropped[1].message).toMatch(/\(rank 7\).*frame of 268435456 bytes exceeds the limit/);
    expect(late.fatal()).toMatch(/exceeds the limit/); // told why, on the wire

    const sneaky = await rawPeer(server.host, server.port);
    sneaky.hello();
    sneaky.socket.write(
      new FrameWriter(FrameType.request).u8(1).u32(1).key('big').bytes(new Uint8Array(1500)).finish(),
    );
    await sneaky.closed;
    expect(dropped[2].message).toMatch(/value of 1500 bytes exceeds the limit of 1024/);

    const garbage = await rawPeer(server.host, server.port);
    garbage.socket.write(Buffer.from([0, 0, 0, 3, 2, 9, 9])); // a client hello cut short
    await garbage.closed;
    expect(dropped[3].message).toMatch(/truncated frame/);

    expect(await good.check(['big'])).toBe(false);
    expect(text(await good.get('k'))).toBe('v');
    expect(text(await (await connect(server)).get('k'))).toBe('v');
  });

  it('a non-loopback server refuses clients without the secret or with a wrong one', async () => {
    const address = nonLoopbackAddress();
    const dropped: RendezvousError[] = [];
    const server = await startServer({
      host: address.bind,
      secret: SECRET,
      onConnectionError: (e) => dropped.push(e),
    });
    expect(server.requiresAuth).toBe(true);
    const at = { host: address.connect, port: server.port, timeoutMs: 5000 };

    // a peer that skips authentication is dropped by the server
    const raw = await rawPeer(at.host, at.port);
    raw.hello();
    await raw.closed;
    expect(dropped[0]).toBeInstanceOf(RendezvousAuthError);
    expect(dropped[0].message).toMatch(/the client sent no authentication/);

    const wrong = await RendezvousClient.connect({ ...at, secret: 'not-the-shared-secret' }).catch((e) => e);
    expect(wrong).toBeInstanceOf(RendezvousAuthError);
    expect(wrong.message).toMatch(/the client failed authentication/);
    expect(dropped[1].message).toMatch(/failed authentication/);

    const none = await RendezvousClient.connect(at).catch((e) => e);
    expect(none).toBeInstanceOf(RendezvousAuthError);
    expect(none.message).toMatch(/requires a shared secret/);

    process.env.TENSORCOMM_RENDEZVOUS_SECRET = SECRET; // the env var serves as the secret too
    expect(rendezvousSecretFromEnv()).toBe(SECRET);
    const right = await RendezvousClient.connect({ ...at, rank: 2 });
    clients.push(right);
    await right.set('ok', 'yes');
    expect(text(await right.get('ok'))).toBe('yes');
  });

  it('refuses to bind a non-loopback address without a secret, and rejects short secrets', async () => {
    await expect(RendezvousServer.start({ host: '0.0.0.0' })).rejects.toThrow(
      /binds 0\.0\.0\.0, which is not loopback, so it needs a shared secret/,
    );
    await expect(RendezvousServer.start({ secret: 'short' })).rejects.toThrow(/at least 16/);
  });

  it('closing the server rejects pending calls and later ones with a clear error', async () => {
    const server = await startServer();
    const c = await connect(server, { rank: 2 });
    const pending = c.get('never').catch((e: unknown) => e);
    const barrier = c.barrier('never', 2).catch((e: unknown) => e);
    await sleep(50);
    await server.close();
    for (const error of [await pending, await barrier]) {
      expect(error).toBeInstanceOf(RendezvousError);
      expect((error as Error).message).toMatch(/^rank 2: (get|barrier)\('never'\).* failed: .*shutting down/);
    }
    await expect(c.set('x', 'y')).rejects.toThrow(/shutting down/);
  });

  it('a server that vanishes without a word rejects pending calls; a silent one fails the handshake in time', async () => {
    // A stand-in server: a proper hello and welcome, then it drops the connection on the first request.
    const fake = net.createServer((socket) => {
      socket.write(
        new FrameWriter(FrameType.serverHello)
          .u32(PROTOCOL_MAGIC)
          .u8(PROTOCOL_VERSION)
          .u8(0)
          .raw(Buffer.alloc(32))
          .u32(4096)
          .u32(1024)
          .finish(),
      );
      socket.once('data', () => {
        socket.write(new FrameWriter(FrameType.welcome).u8(0).u32(0).finish());
        socket.once('data', () => socket.destroy());
      });
    });
    const silent = net.createServer(() => {});
    const listen = (s: net.Server) =>
      new Promise<number>((resolve) =>
        s.listen(0, '127.0.0.1', () => resolve((s.address() as net.AddressInfo).port)),
      );
    try {
      const c = await RendezvousClient.connect({
        host: '127.0.0.1',
        port: await listen(fake),
        rank: 1,
        timeoutMs: 5000,
      });
      clients.push(c);
      const error = await c.get('k').catch((e) => e);
      expect(error).toBeInstanceOf(RendezvousError);
      expect(error.message).toMatch(
        /^rank 1: get\('k'\) failed: the connection to the rendezvous server at .* was lost/,
      );

      const timeout = await RendezvousClient.connect({
        host: '127.0.0.1',
        port: await listen(silent),
        timeoutMs: 300,
      }).catch((e) => e);
      expect(timeout).toBeInstanceOf(CommTimeoutError);
      expect(timeout.message).toMatch(
        /handshake with the rendezvous server at .* failed: no answer before the deadline/,
      );
    } finally {
      await Promise.all([fake, silent].map((s) => new Promise((resolve) => s.close(resolve))));
    }
  });

  it('a client holding a secret refuses a server that does not authenticate', async () => {
    const server = await startServer();
    const error = await RendezvousClient.connect({
      host: server.host,
      port: server.port,
      secret: SECRET,
    }).catch((e) => e);
    expect(error).toBeInstanceOf(RendezvousAuthError);
    expect(error.message).toMatch(/holds a secret but the server does not authenticate/);
  });

  it('connect retries until the server is up, and times out naming the address when it never is', async () => {
    const probe = await RendezvousServer.start();
    const port = probe.port;
    await probe.close();
    const connecting = RendezvousClient.connect({ host: '127.0.0.1', port, timeoutMs: 10_000 });
    await sleep(200);
    await startServer({ port });
    const client = await connecting;
    clients.push(client);
    await client.set('up', '1');

    const free = await RendezvousServer.start();
    const freePort = free.port;
    await free.close();
    const error = await RendezvousClient.connect({
      host: '127.0.0.1',
      port: freePort,
      timeoutMs: 300,
      rank: 5,
    }).catch((e) => e);
    expect(error).toBeInstanceOf(CommTimeoutError);
    expect(error.message).toMatch(
      new RegExp(
        `^rank 5 could not connect to the rendezvous server at 127\\.0\\.0\\.1:${freePort} within 300 ms`,
      ),
    );
  });

  it('leaves no handles open: a process using server and clients exits on its own after close', async () => {
    const serverUrl = new URL('../src/rendezvous/server.ts', import.meta.url).href;
    const clientUrl = new URL('../src/rendezvous/client.ts', import.meta.url).href;
    const script = `
      const { RendezvousServer } = await import(${JSON.stringify(serverUrl)});
      const { RendezvousClient } = await import(${JSON.stringify(clientUrl)});
      const server = await RendezvousServer.start();
      const a = await RendezvousClient.connect({ host: server.host, port: server.port, rank: 0 });
      const b = await RendezvousClient.connect({ host: server.host, port: server.port, rank: 1 });
      await Promise.all([a.barrier('x', 2), b.barrier('x', 2)]);
      await a.get('k', { timeoutMs: 100 }).catch(() => {});
      const late = b.get('k2').catch(() => {});
      await server.close();
      await late;
      a.close(); b.close();
      console.log('done');`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await exited;
    clearTimeout(timer);
    expect(out).toContain('done');
    expect(code).toBe(0);
  }, 30_000);
});
