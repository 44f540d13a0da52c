/** Errors of the p2p layer, so callers can tell a broken protocol from a timeout or a dead peer. */
import {
  CollectiveMismatchError,
  CommTimeoutError,
  RankFailedError,
  retold,
  TensorcommError,
} from '../runtime/errors.ts';

/**
 * A message header that is malformed, truncated, oversized or of a newer version.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class P2PHeaderError extends TensorcommError {
  override name = 'P2PHeaderError';
  override readonly code: string = 'ERR_TC_P2P_HEADER';
}

/**
 * The two ends of a channel disagree about a message: one used send/recv and
 * the other sendTensor/recvTensor, a broadcast met a recv, or messages were
 * lost. The channel is unusable afterwards (its streams are out of step).
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class P2PProtocolError extends TensorcommError {
  override name = 'P2PProtocolError';
  override readonly code: string = 'ERR_TC_P2P_PROTOCOL';
}

/**
 * The compression codec of the cluster config failed: its startup probe (a
 * native module missing, a round trip that changed the bytes), or a chunk
 * that did not restore to its size (the data is corrupt).
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class P2PCompressionError extends TensorcommError {
  override name = 'P2PCompressionError';
  override readonly code: string = 'ERR_TC_P2P_COMPRESSION';
}

/**
 * The error a p2p Work rejects with: the ThreadGroup's error with the call and
 * the peer worker named in front, keeping its class (a dead peer stays a
 * RankFailedError, a timeout a CommTimeoutError). A shape or dtype mismatch on
 * a p2p stream can only mean the two ends paired different calls.
 */
export function explain(error: unknown, where: string): Error {
  if (error instanceof P2PHeaderError || error instanceof P2PProtocolError) return error;
  // A thrown value that is no Error: none of tensorcomm's.
  if (!(error instanceof Error)) return new Error(`${where}: ${String(error)}`);
  const message = `${where}: ${error.message}`;
  if (error instanceof CollectiveMismatchError) {
    return new P2PProtocolError(
      `${message} (one end used send/recv and the other sendTensor/recvTensor, or recvTensor's buffer does not match the sent tensor)`,
      { cause: error },
    );
  }
  if (error instanceof RankFailedError) return new RankFailedError(message, error.failedRank);
  if (error instanceof CommTimeoutError) return new CommTimeoutError(message, { cause: error });
  if (error instanceof TypeError || error instanceof RangeError) return error;
  return retold(error, message);
}
