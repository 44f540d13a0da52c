/**
 * Opening this rank's connection to a peer of higher rank: connect, then the
 * dialer's handshake, again and again with a short backoff while the peer
 * does not answer (it may not listen yet, or be busy), until the deadline or
 * the abort signal. A refusal ends the tries at once: the peer heard this
 * rank and said no, and asking again would get the same answer.
 */
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { FrameDecoder } from '../rendezvous/protocol.ts';
import { NetworkStoreHandshakeError } from './errors.ts';
import { dialerHandshake, type LocalIdentity, type PeerHello } from './handshake.ts';
import { FRAME_LIMIT } from './wire.ts';

/** Where a rank's store listens. */
export interface NetworkPeer {
  rank: number;
  host: string;
  port: number;
}

export interface Dialed {
  socket: net.Socket;
  /** Holds whatever the peer sent after its welcome. */
  decoder: FrameDecoder;
  hello: PeerHello;
}

export interface DialOptions {
  /** performance.now() milliseconds. */
  deadline: number;
  signal: AbortSignal;
  handshakeTimeoutMs: number;
  /** Told why each try failed, for the message of a connect that times out. */
  failedTry: (reason: string) => void;
}

const FIRST_BACKOFF_MS = 10;
const MAX_BACKOFF_MS = 500;

export async function dial(peer: NetworkPeer, local: LocalIdentity, o: DialOptions): Promise<Dialed> {
  const address = `${peer.host}:${peer.port}`;
  for (let backoff = FIRST_BACKOFF_MS; ; backoff = Math.min(2 * backoff, MAX_BACKOFF_MS)) {
    const socket = net.connect({ host: peer.host, port: peer.port, signal: o.signal });
    socket.unref();
    socket.setNoDelay(true);
    // A failure also closes the socket: the try's outcome, or the connection's 'close' handler, reports it.
    socket.on('error', () => {});
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve).once('error', reject);
      });
      const decoder = new FrameDecoder(FRAME_LIMIT);
      const timeoutMs = Math.max(1, Math.min(o.handshakeTimeoutMs, o.deadline - performance.now()));
      const hello = await dialerHandshake(socket, decoder, local, { rank: peer.rank, address }, timeoutMs);
      return { socket, decoder, hello };
    } catch (error) {
      socket.destroy();
      if (error instanceof NetworkStoreHandshakeError || o.signal.aborted) throw error;
      o.failedTry((error as Error).message);
      if (performance.now() + backoff >= o.deadline) throw error;
    }
    await sleep(backoff, undefined, { signal: o.signal });
  }
}
