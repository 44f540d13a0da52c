/**
 * The client's side of the rendezvous handshake: read the server's hello
 * (protocol version, limits, nonce, whether it authenticates), answer with
 * this rank and, when asked, the HMAC proof, and check the server's proof in
 * its welcome. Runs on a fresh socket before the client reads responses.
 */
import type net from 'node:net';
import { CommTimeoutError } from '../runtime/errors.ts';
import { newNonce, proof, proofMatches } from './auth.ts';
import { RendezvousAuthError, RendezvousError } from './errors.ts';
import {
  FatalKind,
  type FrameDecoder,
  FrameReader,
  FrameType,
  FrameWriter,
  type Limits,
  MAX_KEY_BYTES_LIMIT,
  MAX_VALUE_BYTES_LIMIT,
  maxFrameBytes,
  NONCE_BYTES,
  PROTOCOL_MAGIC,
  PROTOCOL_VERSION,
} from './protocol.ts';

export interface HandshakeOptions {
  secret: string | undefined;
  rank: number | undefined;
  /** Absolute deadline in performance.now() milliseconds. */
  deadline: number;
  /** Who is asking of whom, for errors: e.g. "rank 2" and "127.0.0.1:29500". */
  who: string;
  address: string;
}

/** What the server announced: its limits, and how long it lets a connection stay quiet (0: forever). */
export interface ServerTerms extends Limits {
  idleTimeoutMs: number;
}

/** Limits a frame may be read with before the server announced its own. */
const HANDSHAKE_LIMITS: Limits = { maxKeyBytes: MAX_KEY_BYTES_LIMIT, maxValueBytes: 0 };

/**
 * Resolves to the server's terms once it welcomed this client; `decoder`
 * then accepts frames up to them and keeps any bytes that came after the
 * welcome. On failure the socket is destroyed and the error says why.
 */
export function clientHandshake(
  socket: net.Socket,
  decoder: FrameDecoder,
  o: HandshakeOptions,
): Promise<ServerTerms> {
  return new Promise<ServerTerms>((resolve, reject) => {
    const clientNonce = newNonce();
    let hello: ServerHello | undefined;
    let idleTimeoutMs = 0;
    const finish = (error?: Error) => {
      clearTimeout(timer);
      socket.off('data', onData).off('error', onError).off('close', onClose);
      if (!error) return resolve({ ...hello!.limits, idleTimeoutMs });
      socket.destroy();
      const Kind =
        error instanceof RendezvousAuthError
          ? RendezvousAuthError
          : error instanceof CommTimeoutError
            ? CommTimeoutError
            : RendezvousError;
      reject(
        new Kind(`${o.who}: handshake with the rendezvous server at ${o.address} failed: ${error.message}`),
      );
    };
    /** Handles one frame; true once the handshake is complete. */
    const step = (frame: FrameReader): boolean => {
      const type = frame.u8();
      if (type === FrameType.fatal) throw readFatal(frame, o.address);
      if (type === FrameType.serverHello && !hello) {
        hello = readServerHello(frame);
        socket.write(clientHello(hello, clientNonce, o));
        return false;
      }
      if (type === FrameType.welcome && hello) {
        const serverProof = frame.raw(frame.u8());
        idleTimeoutMs = frame.u32();
        frame.end();
        const expected =
          o.secret === undefined ? undefined : proof(o.secret, 'server', hello.nonce, clientNonce);
        if (expected && !proofMatches(expected, serverProof)) {
          throw new RendezvousAuthError('the server failed to prove it holds the shared secret');
        }
        decoder.limit = maxFrameBytes(hello.limits);
        return true;
      }
      throw new RendezvousError(`unexpected frame type ${type} during the handshake`);
    };
    const onData = (chunk: Buffer) => {
      try {
        decoder.push(chunk);
        for (let body = decoder.next(); body; body = decoder.next()) {
          if (step(new FrameReader(body, hello?.limits ?? HANDSHAKE_LIMITS))) return finish();
        }
      } catch (error) {
        finish(error as Error);
      }
    };
    const onError = (e: Error) => finish(new RendezvousError(e.message));
    const onClose = () => finish(new RendezvousError('the server closed the connection'));
    const timer = setTimeout(
      () => finish(new CommTimeoutError('no answer before the deadline')),
      Math.max(0, o.deadline - performance.now()),
    );
    socket.on('data', onData).on('error', onError).on('close', onClose);
  });
}

export interface ServerHello {
  nonce: Buffer;
  authRequired: boolean;
  limits: Limits;
}

/** Reads the rest of a server hello (after its type byte). */
export function readServerHello(frame: FrameReader): ServerHello {
  if (frame.u32() !== PROTOCOL_MAGIC)
    throw new RendezvousError('the peer is not a tensorcomm rendezvous server');
  const version = frame.u8();
  if (version !== PROTOCOL_VERSION) {
    throw new RendezvousError(
      `the server speaks protocol version ${version}, this client ${PROTOCOL_VERSION}`,
    );
  }
  const authRequired = frame.u8() === 1;
  const nonce = Buffer.from(frame.raw(NONCE_BYTES));
  const limits = readLimits(frame);
  frame.end();
  return { nonce, authRequired, limits };
}

/** This client's answer to the hello; refuses a server whose authentication does not match its own secret. */
function clientHello(hello: ServerHello, clientNonce: Buffer, o: HandshakeOptions): Buffer {
  if (hello.authRequired && o.secret === undefined) {
    throw new RendezvousAuthError(
      'the server requires a shared secret: pass { secret } or set TENSORCOMM_RENDEZVOUS_SECRET',
    );
  }
  if (!hello.authRequired && o.secret !== undefined) {
    throw new RendezvousAuthError(
      'this client holds a secret but the server does not authenticate; refusing it',
    );
  }
  const p = o.secret === undefined ? Buffer.alloc(0) : proof(o.secret, 'client', hello.nonce, clientNonce);
  return new FrameWriter(FrameType.clientHello)
    .u32(PROTOCOL_MAGIC)
    .u8(PROTOCOL_VERSION)
    .i32(o.rank ?? -1)
    .raw(clientNonce)
    .u8(p.byteLength)
    .raw(p)
    .finish();
}

/** The error a fatal frame carries: why the server is closing the connection. */
export function readFatal(frame: FrameReader, address: string): RendezvousError {
  const kind = frame.u8();
  const message = `the rendezvous server at ${address} closed the connection: ${frame.text()}`;
  return kind === FatalKind.auth ? new RendezvousAuthError(message) : new RendezvousError(message);
}

function readLimits(frame: FrameReader): Limits {
  const maxKeyBytes = frame.u32();
  const maxValueBytes = frame.u32();
  if (
    maxKeyBytes < 1 ||
    maxKeyBytes > MAX_KEY_BYTES_LIMIT ||
    maxValueBytes < 1 ||
    maxValueBytes > MAX_VALUE_BYTES_LIMIT
  ) {
    throw new RendezvousError(
      `the server announced limits out of range (key ${maxKeyBytes}, value ${maxValueBytes})`,
    );
  }
  return { maxKeyBytes, maxValueBytes };
}
