/**
 * A connection's writes straight from the rank's thread
 * (src/network-store/socket-writes.ts): the kernel takes them at once where
 * nothing waits in the socket's stream, and they never pass bytes that do.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { socketFd, writeToSocket } from '../src/network-store/socket-writes.ts';

const opened: net.Socket[] = [];
let server: net.Server | undefined;
afterEach(() => {
  for (const socket of opened.splice(0)) socket.destroy();
  server?.close();
  server = undefined;
});

/** Both ends of a loopback connection; `received()` is what the far end has read so far. */
async function connection() {
  let far: net.Socket | undefined;
  const chunks: Buffer[] = [];
  const listening = net.createServer((socket) => {
    far = socket;
    opened.push(socket);
    socket.on('data', (chunk) => chunks.push(chunk));
  });
  server = listening;
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  const near = net.connect((listening.address() as net.AddressInfo).port, '127.0.0.1');
  opened.push(near);
  await new Promise<void>((resolve) => near.once('connect', resolve));
  while (!far) await new Promise((resolve) => setImmediate(resolve));
  const received = () => Buffer.concat(chunks).toString();
  const until = async (text: string) => {
    while (received().length < text.length) await new Promise((resolve) => setTimeout(resolve, 1));
    return received();
  };
  return { near, until };
}

describe('writeToSocket', () => {
  it('hands the kernel what it takes at once, and says so at once', async () => {
    const { near, until } = await connection();
    expect(socketFd(near)).toBeGreaterThanOrEqual(0);
    let written = false;
    writeToSocket(near, Buffer.from('hello'), () => {
      written = true;
    });
    expect(written).toBe(true);
    expect(near.writableLength).toBe(0);
    expect(await until('hello')).toBe('hello');
  });

  it('goes behind bytes waiting in the stream, in order', async () => {
    const { near, until } = await connection();
    near.cork();
    near.write('first ');
    let written = false;
    writeToSocket(near, Buffer.from('second'), () => {
      written = true;
    });
    expect(written).toBe(false);
    near.uncork();
    expect(await until('first second')).toBe('first second');
    expect(written).toBe(true);
  });

  it('a socket that closed takes nothing: its stream reports it', async () => {
    const { near } = await connection();
    near.destroy();
    expect(socketFd(near)).toBeUndefined();
    const failed = new Promise<Error | null | undefined>((resolve) =>
      writeToSocket(near, Buffer.from('late'), (error?: Error | null) => resolve(error)),
    );
    expect(await failed).toBeInstanceOf(Error);
  });
});
