/**
 * How much a rendezvous server lets its peers make it hold, and for how
 * long: sizes of keys, values and frames, the bytes stored, the bytes of
 * frames still arriving, connections per address and the timeouts that close
 * connections which stop making progress. Each has a default that a job's
 * bootstrap traffic (small keys, values up to tens of MiB) never meets.
 */
import {
  DEFAULT_MAX_KEY_BYTES,
  DEFAULT_MAX_VALUE_BYTES,
  type Limits,
  MAX_KEY_BYTES_LIMIT,
  MAX_TIMEOUT_MS,
  MAX_VALUE_BYTES_LIMIT,
  maxFrameBytes,
} from './protocol.ts';

export interface ServerLimitOptions {
  /** Largest value a client may set; default 64 MiB (at most 1 GiB). */
  maxValueBytes?: number;
  /** Longest key in UTF-8 bytes; default 4096 (at most 65535). */
  maxKeyBytes?: number;
  /**
   * Cap on what the server holds for its clients: every stored key and value
   * (plus 64 bytes each) and every parked get/wait/barrier with its keys
   * (plus 256 bytes each). A set or wait past it is answered with an error
   * naming the cap, and nothing stored is lost. Default 512 MiB.
   */
  maxStoredBytes?: number;
  /**
   * Cap on the bytes of frames still arriving, over all connections. A frame
   * that does not fit waits, its connection unread, until others finish;
   * default the larger of 256 MiB and the largest frame the limits allow.
   */
  maxBufferedBytes?: number;
  /**
   * Connections one client address may hold at once, in or after the
   * handshake. At the cap, the oldest of its connections still in the
   * handshake is dropped for a new one; with none, the new one is refused.
   * Default 1024.
   */
  maxConnectionsPerAddress?: number;
  /** A peer must finish the handshake within this time; default 10 s. */
  handshakeTimeoutMs?: number;
  /**
   * A connection that, after the handshake, has no call parked and sends
   * nothing for this long is closed; RendezvousClient pings every third of
   * it, so only a peer that stopped talking is closed. Default 300 s.
   */
  idleTimeoutMs?: number;
  /** A frame must arrive whole within this time of its first byte, so one cannot be dribbled; default 120 s. */
  frameTimeoutMs?: number;
}

export interface ServerLimits extends Limits {
  maxStoredBytes: number;
  maxBufferedBytes: number;
  maxConnectionsPerAddress: number;
  handshakeTimeoutMs: number;
  idleTimeoutMs: number;
  frameTimeoutMs: number;
}

export const DEFAULT_MAX_STORED_BYTES = 512 * 1024 * 1024;
export const DEFAULT_MAX_BUFFERED_BYTES = 256 * 1024 * 1024;
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 1024;
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;
export const DEFAULT_FRAME_TIMEOUT_MS = 120_000;

/** The options with their defaults, each checked; a bad one is a RangeError naming it. */
export function resolveServerLimits(o: ServerLimitOptions): ServerLimits {
  const maxKeyBytes = check('maxKeyBytes', o.maxKeyBytes ?? DEFAULT_MAX_KEY_BYTES, MAX_KEY_BYTES_LIMIT);
  const maxValueBytes = check(
    'maxValueBytes',
    o.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES,
    MAX_VALUE_BYTES_LIMIT,
  );
  const frame = maxFrameBytes({ maxKeyBytes, maxValueBytes });
  const maxBufferedBytes = check(
    'maxBufferedBytes',
    o.maxBufferedBytes ?? Math.max(DEFAULT_MAX_BUFFERED_BYTES, frame),
    Number.MAX_SAFE_INTEGER,
  );
  if (maxBufferedBytes < frame) {
    throw new RangeError(
      `RendezvousServer.start: maxBufferedBytes ${maxBufferedBytes} is smaller than the largest frame the key and value limits allow (${frame} bytes), which could then never arrive`,
    );
  }
  const timeout = (name: string, value: number) => check(name, value, MAX_TIMEOUT_MS);
  return {
    maxKeyBytes,
    maxValueBytes,
    maxBufferedBytes,
    maxStoredBytes: check(
      'maxStoredBytes',
      o.maxStoredBytes ?? DEFAULT_MAX_STORED_BYTES,
      Number.MAX_SAFE_INTEGER,
    ),
    maxConnectionsPerAddress: check(
      'maxConnectionsPerAddress',
      o.maxConnectionsPerAddress ?? DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
      2 ** 31 - 1,
    ),
    handshakeTimeoutMs: timeout('handshakeTimeoutMs', o.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS),
    idleTimeoutMs: timeout('idleTimeoutMs', o.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS),
    frameTimeoutMs: timeout('frameTimeoutMs', o.frameTimeoutMs ?? DEFAULT_FRAME_TIMEOUT_MS),
  };
}

function check(name: string, value: number, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`RendezvousServer.start: ${name} must be an integer from 1 to ${max}, got ${value}`);
  }
  return value;
}
