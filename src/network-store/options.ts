/**
 * The network store's options and the peer list connect() takes, checked
 * before anything is bound or dialed, with the defaults filled in.
 */
import { checkSecret } from '../rendezvous/auth.ts';
import { encodeText, MAX_KEY_BYTES } from '../runtime/store-limits.ts';
import type { NetworkPeer } from './dial.ts';
import type { NetworkStoreHandshakeError } from './errors.ts';
import type { LocalIdentity } from './handshake.ts';

export interface NetworkStoreOptions {
  /** This process's global rank. */
  rank: number;
  /** The job's id: a connection from a rank of another job is refused. */
  jobId: string;
  /** The job's secret (at least 16 characters): both ends of every connection prove they hold it. */
  secret: string;
  /** Default for every wait without its own timeoutMs, connect's included (default 300 s). */
  timeoutMs?: number;
  /** Address to listen on (default '127.0.0.1'); the port is picked free. */
  host?: string;
  /** The largest value this rank accepts; producers check before they send (default 1 GiB). */
  maxValueBytes?: number;
  /** The most bytes of values this rank holds for gets not made yet; a value beyond is refused (default 2 GiB). */
  maxBufferedBytes?: number;
  /** A peer that connects must finish its handshake within this (default 10 s). */
  handshakeTimeoutMs?: number;
  /** Told about every connection refused in its handshake, which affects nothing else (default console.warn). */
  onRefused?: (error: NetworkStoreHandshakeError) => void;
  /**
   * Whether waits spin for a moment reading their peers' sockets before they
   * sleep (default false): only worth it while every rank of this machine has
   * a core of its own (see SpinPolicy). Only where libc can be called
   * (Linux with glibc); elsewhere waits sleep at once.
   */
  spin?: boolean;
}

export interface NetworkConnectOptions {
  /** How long to wait for every peer (default: the store's timeoutMs). */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 300_000;
const DEFAULT_MAX_VALUE_BYTES = 1024 ** 3;
const DEFAULT_MAX_BUFFERED_BYTES = 2 * 1024 ** 3;
const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;
const MAX_RANK = 0xffffffff;

/** The options, checked, with their defaults. */
export interface Settings {
  local: LocalIdentity;
  host: string;
  timeoutMs: number;
  handshakeTimeoutMs: number;
  maxBufferedBytes: number;
  onRefused: (error: NetworkStoreHandshakeError) => void;
  spin: boolean;
}

export function checkPeers(
  peers: readonly NetworkPeer[],
  rank: number,
  where: string,
): Map<number, NetworkPeer> {
  if (!Array.isArray(peers)) throw new TypeError(`${where}: peers must be an array of { rank, host, port }`);
  const expected = new Map<number, NetworkPeer>();
  const seen = new Set<number>();
  for (const peer of peers) {
    const ok =
      Number.isSafeInteger(peer?.rank) &&
      peer.rank >= 0 &&
      peer.rank <= MAX_RANK &&
      typeof peer.host === 'string' &&
      peer.host.length > 0 &&
      Number.isInteger(peer.port) &&
      peer.port > 0 &&
      peer.port < 65536;
    if (!ok)
      throw new TypeError(`${where}: each peer must be { rank, host, port }, got ${JSON.stringify(peer)}`);
    if (seen.has(peer.rank)) throw new TypeError(`${where}: rank ${peer.rank} is listed twice`);
    seen.add(peer.rank);
    if (peer.rank !== rank) expected.set(peer.rank, { rank: peer.rank, host: peer.host, port: peer.port });
  }
  return expected;
}

export function checkOptions(options: NetworkStoreOptions): Settings {
  const where = 'NetworkTensorStore.listen';
  const { rank, jobId, secret, host = '127.0.0.1' } = options;
  if (!Number.isSafeInteger(rank) || rank < 0 || rank > MAX_RANK) {
    throw new RangeError(`${where}: rank must be an integer from 0 to ${MAX_RANK}, got ${rank}`);
  }
  const jobIdBytes = typeof jobId === 'string' ? encodeText(jobId).length : 0;
  if (jobIdBytes === 0 || jobIdBytes > MAX_KEY_BYTES) {
    throw new TypeError(`${where}: jobId must be a string of 1..${MAX_KEY_BYTES} bytes of UTF-8`);
  }
  if (typeof secret !== 'string') {
    throw new TypeError(`${where}: secret is required (the job's secret, TENSORCOMM_RENDEZVOUS_SECRET)`);
  }
  checkSecret(secret);
  return {
    local: {
      jobId,
      secret,
      rank,
      maxValueBytes: byteCount(options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES, 'maxValueBytes', where),
    },
    host,
    timeoutMs: positive(options.timeoutMs ?? DEFAULT_TIMEOUT_MS, 'timeoutMs', where),
    handshakeTimeoutMs: positive(
      options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
      'handshakeTimeoutMs',
      where,
    ),
    maxBufferedBytes: byteCount(
      options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES,
      'maxBufferedBytes',
      where,
    ),
    onRefused: options.onRefused ?? ((error) => console.warn(`tensorcomm network store: ${error.message}`)),
    spin: options.spin === true,
  };
}

function positive(value: number, name: string, where: string): number {
  if (!(Number.isFinite(value) && value > 0)) {
    throw new RangeError(`${where}: ${name} must be a positive number, got ${value}`);
  }
  return value;
}

function byteCount(value: number, name: string, where: string): number {
  if (!(Number.isSafeInteger(value) && value >= 0)) {
    throw new RangeError(`${where}: ${name} must be a non-negative integer, got ${value}`);
  }
  return value;
}
