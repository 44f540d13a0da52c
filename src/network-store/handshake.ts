/**
 * The handshake that opens a network-store connection. The lower rank dials,
 * the higher accepts:
 *
 *   acceptor → hello   magic, version, nonce
 *   dialer   → join    magic, version, job id, its rank, the rank it dials, nonce, maxValueBytes, proof
 *   acceptor → welcome its rank, maxValueBytes, proof          (or fatal, with the reason, and it hangs up)
 *
 * Proofs are rendezvous/auth.ts's HMACs over both nonces, with a purpose that
 * names this protocol, the job and both ranks: a rendezvous proof, another
 * job's or one made for another pair of ranks does not pass, and neither does
 * a recorded one. Until the welcome a peer can make this rank hold at most
 * one frame of FRAME_LIMIT bytes, for at most the handshake timeout.
 */
import type net from 'node:net';
import { newNonce, proof, proofMatches } from '../rendezvous/auth.ts';
import { type FrameDecoder, type FrameReader, FrameWriter, NONCE_BYTES } from '../rendezvous/protocol.ts';
import { CommTimeoutError } from '../runtime/errors.ts';
import { NetworkStoreHandshakeError } from './errors.ts';
import { Frame, fatalFrame, frameReader, MAGIC, readFatal, VERSION } from './wire.ts';

/** What a rank tells and proves about itself. */
export interface LocalIdentity {
  jobId: string;
  secret: string;
  rank: number;
  /** The largest value this rank accepts; producers check against it before they send. */
  maxValueBytes: number;
}

/** What the other end of an authenticated connection told about itself. */
export interface PeerHello {
  rank: number;
  maxValueBytes: number;
}

/** Decides whether an authenticated peer may stay: a reason to refuse it, or undefined. */
export type Admit = (peer: PeerHello) => string | undefined;

function purpose(jobId: string, dialer: number, acceptor: number): string {
  return `tensorcomm-network-store-v${VERSION}/${JSON.stringify(jobId)}/${dialer}/${acceptor}`;
}

/**
 * Dials `peer`'s side of a fresh connection. Rejects with a
 * NetworkStoreHandshakeError when the peer refuses this rank or is not a
 * network store (trying again would not help), and with a plain Error or a
 * CommTimeoutError when the connection broke or went quiet (it might).
 */
export function dialerHandshake(
  socket: net.Socket,
  decoder: FrameDecoder,
  local: LocalIdentity,
  peer: { rank: number; address: string },
  timeoutMs: number,
): Promise<PeerHello> {
  const them = `rank ${peer.rank} at ${peer.address}`;
  const nonce = newNonce();
  let acceptorNonce: Buffer | undefined;
  let hello: PeerHello | undefined;
  const label = purpose(local.jobId, local.rank, peer.rank);
  return new Promise<PeerHello>((resolve, reject) => {
    exchange(socket, decoder, timeoutMs, (type, frame) => {
      if (type === Frame.fatal) throw new NetworkStoreHandshakeError(readFatal(frame));
      if (type === Frame.hello && !acceptorNonce) {
        checkProtocol(frame, () => 'the peer is not a tensorcomm network store');
        acceptorNonce = Buffer.from(frame.raw(NONCE_BYTES));
        frame.end();
        socket.write(
          joinFrame(local, peer.rank, nonce, proof(local.secret, 'client', acceptorNonce, nonce, label)),
        );
        return false;
      }
      if (type === Frame.welcome && acceptorNonce) {
        hello = { rank: frame.u32(), maxValueBytes: readMaxValueBytes(frame) };
        const acceptorProof = frame.raw(frame.u8());
        frame.end();
        if (hello.rank !== peer.rank) {
          throw new NetworkStoreHandshakeError(`it answered as rank ${hello.rank}`);
        }
        if (!proofMatches(proof(local.secret, 'server', acceptorNonce, nonce, label), acceptorProof)) {
          throw new NetworkStoreHandshakeError("it failed to prove it holds the job's secret");
        }
        return true;
      }
      throw new NetworkStoreHandshakeError(`it sent frame type ${type} during the handshake`);
    }).then(
      () => resolve(hello!),
      (error: Error) => {
        socket.destroy();
        const Kind =
          error instanceof NetworkStoreHandshakeError
            ? NetworkStoreHandshakeError
            : error instanceof CommTimeoutError
              ? CommTimeoutError
              : Error;
        reject(new Kind(`rank ${local.rank}: the handshake with ${them} failed: ${error.message}`));
      },
    );
  });
}

/**
 * Answers a connection that reached this rank's server: `accepted` once the
 * peer proved itself and `admit` let it in (the socket is then paused, with
 * any bytes after the handshake still in `decoder`); `refused` when it did not
 * (the peer is told why and disconnected). Either is called once, and nothing
 * is thrown: whatever a stranger sends stays on its own connection.
 */
export function acceptorHandshake(
  socket: net.Socket,
  decoder: FrameDecoder,
  local: LocalIdentity,
  timeoutMs: number,
  admission: {
    admit: Admit;
    accepted: (peer: PeerHello) => void;
    refused: (error: NetworkStoreHandshakeError) => void;
  },
): void {
  const nonce = newNonce();
  // Taken now: a socket that closed no longer knows its peer.
  const remote = `${socket.remoteAddress}:${socket.remotePort}`;
  let claimed: number | undefined;
  let hello: PeerHello | undefined;
  socket.write(new FrameWriter(Frame.hello).u32(MAGIC).u8(VERSION).raw(nonce).finish());
  exchange(socket, decoder, timeoutMs, (type, frame) => {
    if (type !== Frame.join)
      throw new NetworkStoreHandshakeError(`expected a join frame, got frame type ${type}`);
    checkProtocol(frame, () => 'not a tensorcomm network store peer');
    const jobId = frame.key();
    claimed = frame.u32();
    const target = frame.u32();
    const dialerNonce = frame.raw(NONCE_BYTES);
    const maxValueBytes = readMaxValueBytes(frame);
    const dialerProof = frame.raw(frame.u8());
    frame.end();
    if (jobId !== local.jobId) {
      throw new NetworkStoreHandshakeError(`it belongs to job ${JSON.stringify(jobId)}, not this one`);
    }
    if (target !== local.rank) {
      throw new NetworkStoreHandshakeError(`it dialed rank ${target}, but this is rank ${local.rank}`);
    }
    const label = purpose(local.jobId, claimed, local.rank);
    if (!proofMatches(proof(local.secret, 'client', nonce, dialerNonce, label), dialerProof)) {
      throw new NetworkStoreHandshakeError('it failed authentication');
    }
    hello = { rank: claimed, maxValueBytes };
    const refusal = admission.admit(hello);
    if (refusal) throw new NetworkStoreHandshakeError(refusal);
    const acceptorProof = proof(local.secret, 'server', nonce, dialerNonce, label);
    socket.write(
      new FrameWriter(Frame.welcome)
        .u32(local.rank)
        .f64(local.maxValueBytes)
        .u8(acceptorProof.byteLength)
        .raw(acceptorProof)
        .finish(),
    );
    return true;
  }).then(
    () => admission.accepted(hello!),
    (error: Error) => {
      const from = `${remote}${claimed === undefined ? '' : ` (claiming rank ${claimed})`}`;
      farewell(socket, `rank ${local.rank} refused the connection: ${error.message}`);
      admission.refused(
        new NetworkStoreHandshakeError(
          `rank ${local.rank} refused a connection from ${from}: ${error.message}`,
        ),
      );
    },
  );
}

/** Tells the peer why the connection ends, then ends it, also when the peer never reads. */
export function farewell(socket: net.Socket, message: string): void {
  if (socket.destroyed) return;
  socket.write(fatalFrame(message), () => socket.destroy());
  setTimeout(() => socket.destroy(), 1000).unref();
}

/**
 * Hands the socket's frames to `step` until it returns true, then pauses the
 * socket (its next bytes are for whoever takes over). Rejects with a
 * NetworkStoreHandshakeError on a frame that is bad or refused, and with a
 * plain Error or CommTimeoutError when the connection closes or stays quiet
 * for `timeoutMs`.
 */
function exchange(
  socket: net.Socket,
  decoder: FrameDecoder,
  timeoutMs: number,
  step: (type: number, frame: FrameReader) => boolean,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const finish = (error?: Error) => {
      clearTimeout(timer);
      socket.off('data', onData).off('close', onClose);
      if (error) return reject(error);
      socket.pause();
      resolve();
    };
    const onData = (chunk: Buffer) => {
      try {
        decoder.push(chunk);
        for (let body = decoder.next(); body; body = decoder.next()) {
          const frame = frameReader(body);
          if (step(frame.u8(), frame)) return finish();
        }
      } catch (error) {
        const e = error as Error;
        finish(e instanceof NetworkStoreHandshakeError ? e : new NetworkStoreHandshakeError(e.message));
      }
    };
    // Plain: a dialer tries again (dial.ts), and its store's connect names only the last try, in a timeout.
    const onClose = () => finish(new Error('the connection closed during the handshake'));
    const timer = setTimeout(
      () => finish(new CommTimeoutError(`no handshake within ${timeoutMs} ms`)),
      timeoutMs,
    ).unref();
    socket.on('data', onData).on('close', onClose);
  });
}

function joinFrame(local: LocalIdentity, target: number, nonce: Buffer, joinProof: Buffer): Buffer {
  return new FrameWriter(Frame.join)
    .u32(MAGIC)
    .u8(VERSION)
    .key(local.jobId)
    .u32(local.rank)
    .u32(target)
    .raw(nonce)
    .f64(local.maxValueBytes)
    .u8(joinProof.byteLength)
    .raw(joinProof)
    .finish();
}

function checkProtocol(frame: FrameReader, notOurs: () => string): void {
  if (frame.u32() !== MAGIC) throw new NetworkStoreHandshakeError(notOurs());
  const version = frame.u8();
  if (version !== VERSION) {
    throw new NetworkStoreHandshakeError(
      `the peer speaks network-store protocol version ${version}, this rank ${VERSION}`,
    );
  }
}

function readMaxValueBytes(frame: FrameReader): number {
  const bytes = frame.f64();
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new NetworkStoreHandshakeError(`maxValueBytes ${bytes} is out of range`);
  }
  return bytes;
}
