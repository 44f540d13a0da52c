/**
 * Who may talk to a rendezvous server. On loopback any local process may (as
 * with torch's TCPStore); anywhere else both ends prove they know a shared
 * secret by HMAC over the two nonces of the connection, so the secret never
 * travels and a recorded handshake cannot be replayed.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { RendezvousAuthError } from './errors.ts';

export const SECRET_ENV = 'TENSORCOMM_RENDEZVOUS_SECRET';
const MIN_SECRET_LENGTH = 16;

/** The shared secret from TENSORCOMM_RENDEZVOUS_SECRET, or undefined when unset or empty. */
export function rendezvousSecretFromEnv(): string | undefined {
  return process.env[SECRET_ENV] || undefined;
}

/** A fresh random secret for a launcher to hand its ranks through TENSORCOMM_RENDEZVOUS_SECRET. */
export function generateRendezvousSecret(): string {
  return randomBytes(32).toString('hex');
}

export function checkSecret(secret: string | undefined): string | undefined {
  if (secret !== undefined && secret.length < MIN_SECRET_LENGTH) {
    throw new RendezvousAuthError(
      `rendezvous secret is ${secret.length} characters long; use at least ${MIN_SECRET_LENGTH} (generateRendezvousSecret() makes one)`,
    );
  }
  return secret;
}

export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

/**
 * The one rule on who needs the shared secret: a rendezvous served anywhere
 * but loopback. The server applies it as it starts; whoever will only connect
 * to a server that applies it (a rank rank 0 serves, a launcher node 0's
 * serves) applies it before connecting: otherwise it would retry against a
 * server that refused to start until its connect deadline, minutes later.
 * `remedy` says what to do in the caller's terms.
 */
export function requireSecretOffLoopback(host: string, secret: string | undefined, remedy: string): void {
  if (!isLoopbackHost(host) && secret === undefined) {
    throw new RendezvousAuthError(
      `the rendezvous server binds ${host}, which is not loopback, so it needs a shared secret: ${remedy}`,
    );
  }
}

export function newNonce(): Buffer {
  return randomBytes(32);
}

/**
 * What a peer in `role` sends to prove it holds the secret; the role keeps one
 * side's proof from serving as the other's, and the purpose one protocol's
 * proof (the rendezvous, a network-store connection) from serving as another's.
 */
export function proof(
  secret: string,
  role: 'client' | 'server',
  serverNonce: Uint8Array,
  clientNonce: Uint8Array,
  purpose = 'tensorcomm-rendezvous-v1',
): Buffer {
  return createHmac('sha256', secret)
    .update(`${purpose}/${role}/`)
    .update(serverNonce)
    .update(clientNonce)
    .digest();
}

export function proofMatches(expected: Buffer, received: Uint8Array): boolean {
  return received.byteLength === expected.byteLength && timingSafeEqual(expected, received);
}
