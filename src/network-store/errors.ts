/** Errors of the network store, so callers can tell a refused connection from a broken peer. */
import { RankFailedError, TensorcommError } from '../runtime/errors.ts';

/**
 * A connection was refused during its handshake: the wrong secret, another
 * job, a rank not in the job, another protocol. Trying again would not help.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class NetworkStoreHandshakeError extends TensorcommError {
  override name = 'NetworkStoreHandshakeError';
  override readonly code: string = 'ERR_TC_NETWORK_STORE_HANDSHAKE';
}

/**
 * A frame that does not parse or breaks a limit (a value larger than this rank accepts, a status row
 * over its bound, an unknown type): what the decoder says, before anything is allocated for it. The
 * connection it came on is then closed with a NetworkStoreProtocolError naming the peer.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class NetworkStoreFrameError extends TensorcommError {
  override name = 'NetworkStoreFrameError';
  override readonly code: string = 'ERR_TC_NETWORK_STORE_FRAME';
}

/**
 * A value this rank did not take in: its values no get took yet hold its
 * `maxBufferedBytes`, or memory for the value could not be allocated. The get
 * fails with it, and the producer's wait hears of it.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class NetworkStoreBufferError extends TensorcommError {
  override name = 'NetworkStoreBufferError';
  override readonly code: string = 'ERR_TC_NETWORK_STORE_BUFFER';
}

/**
 * An authenticated peer broke the protocol (a malformed frame): its connection is closed, as if it had died.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class NetworkStoreProtocolError extends RankFailedError {
  override name = 'NetworkStoreProtocolError';
  override readonly code: string = 'ERR_TC_NETWORK_STORE_PROTOCOL';
}
