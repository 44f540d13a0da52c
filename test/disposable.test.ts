/**
 * The library's resources are Disposable (or AsyncDisposable): `using` and
 * `await using` (Node 24 and later) release them at the end of the block, as
 * their close() or destroy() does. The syntax itself runs only where the
 * runtime parses it; the methods it calls are checked on every version.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createJobDirectory,
  FileTensorStore,
  generateRendezvousSecret,
  InvalidStateError,
  MemoryTensorStore,
  NetworkTensorStore,
  RendezvousClient,
  RendezvousServer,
  Tensor,
  type TensorStore,
} from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';

/** Runs `body` (a block that may say `using` and `await using`) with `values` in scope, or undefined where the runtime cannot parse it. */
function withUsing(
  parameters: string[],
  body: string,
): ((...values: unknown[]) => Promise<void>) | undefined {
  const AsyncFunction = (async () => {}).constructor as new (
    ...source: string[]
  ) => (...values: unknown[]) => Promise<void>;
  try {
    return new AsyncFunction(...parameters, body);
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

const usingBlock = withUsing(['open'], '{ using resource = open(); } ');
const awaitUsingBlock = withUsing(['open'], '{ await using resource = await open(); }');
const parsesUsing = usingBlock !== undefined && awaitUsingBlock !== undefined;

const root = mkdtempSync(join(tmpdir(), 'tensorcomm-disposable-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('stores are Disposable', () => {
  const stores: Array<[string, () => Promise<TensorStore & Disposable>]> = [
    ['MemoryTensorStore', async () => new MemoryTensorStore()],
    [
      'FileTensorStore',
      async () => new FileTensorStore({ dir: createJobDirectory({ jobId: 'd', root }), rank: 0 }),
    ],
    [
      'NetworkTensorStore',
      () => NetworkTensorStore.listen({ rank: 0, jobId: 'd', secret: generateRendezvousSecret() }),
    ],
  ];

  it.each(stores)('%s: [Symbol.dispose]() closes it', async (_, open) => {
    const store = await open();
    store[Symbol.dispose]();
    await expect(store.srcSet('k', Tensor.zeros([1]), 1)).rejects.toThrow(/closed/);
  });

  it.runIf(parsesUsing).each(stores)('%s: a using block closes it at its end', async (_, open) => {
    const store = await open();
    await usingBlock?.(() => store);
    await expect(store.srcSet('k', Tensor.zeros([1]), 1)).rejects.toThrow(/closed/);
  });
});

describe('the rendezvous server and client are disposable', () => {
  const start = () => RendezvousServer.start({ host: '127.0.0.1', port: 0, secret: undefined });
  const connect = (server: RendezvousServer) =>
    RendezvousClient.connect({ host: '127.0.0.1', port: server.port, timeoutMs: 5_000 });

  it('[Symbol.asyncDispose]() closes the server, [Symbol.dispose]() the client', async () => {
    const server = await start();
    const client = await connect(server);
    client[Symbol.dispose]();
    await expect(client.barrier('b', 2, { timeoutMs: 1_000 })).rejects.toThrow(/closed/);
    const other = await connect(server);
    const waiting = other.barrier('b', 2, { timeoutMs: 5_000 });
    await server[Symbol.asyncDispose]();
    await expect(waiting).rejects.toThrow(/closed/);
    other.close();
  });

  it.runIf(parsesUsing)('an await using block closes the server at its end', async () => {
    let client: RendezvousClient | undefined;
    let waiting: Promise<void> | undefined;
    await awaitUsingBlock?.(async () => {
      const server = await start();
      client = await connect(server);
      waiting = client.barrier('b', 2, { timeoutMs: 5_000 });
      return server;
    });
    await expect(waiting).rejects.toThrow(/closed/);
    client?.close();
  });
});

rankTest('a group is Disposable: destroyed at the end of its block', { worldSize: 2 }, async (ctx) => {
  const group = await ctx.newGroup([0, 1]);
  await group.barrier();
  group[Symbol.dispose]();
  await expect(group.barrier()).rejects.toThrow(InvalidStateError);
  const scoped = await ctx.newGroup([0, 1]);
  await usingBlock?.(() => scoped);
  if (usingBlock) await expect(scoped.barrier()).rejects.toThrow(/the group was destroyed/);
  const pair = await ctx.collective.createCollectiveGroup(['rank-0', 'rank-1']);
  pair[Symbol.dispose]();
  await expect(pair.send({ step: 1 })).rejects.toThrow(/closed/);
});

rankTest(
  "a rank's context closes once: [Symbol.asyncDispose]() and the runtime's close after it share the first close",
  { worldSize: 2 },
  async (ctx) => {
    await ctx.world.barrier();
    const closing = ctx[Symbol.asyncDispose]();
    expect(ctx.close()).toBe(closing);
    await closing;
  },
);
