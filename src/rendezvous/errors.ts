/** Errors of the rendezvous store, so callers can tell a refused peer from a broken connection or a timeout. */
import { CommTimeoutError, TensorcommError } from '../runtime/errors.ts';

/**
 * A malformed or oversized frame, a closed connection, or a request the server refused.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class RendezvousError extends TensorcommError {
  override name = 'RendezvousError';
  override readonly code: string = 'ERR_TC_RENDEZVOUS';
}

/**
 * The peer did not prove it knows the shared secret (or the server asked for one the client lacks).
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class RendezvousAuthError extends RendezvousError {
  override name = 'RendezvousAuthError';
  override readonly code: string = 'ERR_TC_RENDEZVOUS_AUTH';
}

/**
 * A get/wait/barrier ran past its deadline; `missing` lists the keys (or ranks) still missing.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class RendezvousTimeoutError extends CommTimeoutError {
  override name = 'RendezvousTimeoutError';
  override readonly code: string = 'ERR_TC_RENDEZVOUS_TIMEOUT';
  constructor(
    message: string,
    readonly missing: readonly string[],
  ) {
    super(message);
  }
}

/**
 * Connecting found no server before the deadline (nothing listening, or the
 * address unreachable), as opposed to a server that answered and then failed
 * or stalled the handshake. Callers that know who should serve add why it
 * might not be there.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class RendezvousUnreachableError extends CommTimeoutError {
  override name = 'RendezvousUnreachableError';
  override readonly code: string = 'ERR_TC_RENDEZVOUS_UNREACHABLE';
}
