/**
 * The record that closes a sender's header stream, once per sync: either the
 * stream as this sender planned it (bucket and tensor counts, digest) or the error it
 * failed with. It travels on the header tag right after the sender's last
 * bucket header, so a receiver meets it exactly where it would otherwise wait
 * for that sender's next header: a sender that failed, or whose stream ended
 * early or ran on, is known at once instead of at a timeout.
 *
 *   magic u32 'TCWE' | version u16 | flags u16 (bit 0: failed) | buckets u32 | tensors u32 | digest u32
 *   | message length u32 | message UTF-8 (failed only; at most MAX_MESSAGE_BYTES)
 */
import { WeightSyncHeaderError } from './errors.ts';
import { HEADER_VERSION } from './header.ts';

export const STREAM_END_MAGIC = 0x45574354; // 'TCWE' read as a little-endian u32
const FIXED_BYTES = 24;
const MAX_MESSAGE_BYTES = 4096;
const FLAG_FAILED = 1;

export type StreamEnd =
  | { failed: false; buckets: number; tensors: number; digest: number }
  | { failed: true; error: string };

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8');

export function encodeStreamEnd(end: StreamEnd): Uint8Array {
  const message = end.failed ? truncateUtf8(end.error, MAX_MESSAGE_BYTES) : new Uint8Array(0);
  const bytes = new Uint8Array(FIXED_BYTES + message.byteLength);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, STREAM_END_MAGIC, true);
  view.setUint16(4, HEADER_VERSION, true);
  view.setUint16(6, end.failed ? FLAG_FAILED : 0, true);
  view.setUint32(8, end.failed ? 0 : end.buckets, true);
  view.setUint32(12, end.failed ? 0 : end.tensors, true);
  view.setUint32(16, end.failed ? 0 : end.digest >>> 0, true);
  view.setUint32(20, message.byteLength, true);
  bytes.set(message, FIXED_BYTES);
  return bytes;
}

/** Whether a message of the header stream is a stream end (rather than a bucket header). */
export function isStreamEnd(bytes: unknown): bytes is Uint8Array {
  return (
    bytes instanceof Uint8Array &&
    bytes.byteLength >= 4 &&
    new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) === STREAM_END_MAGIC
  );
}

export function decodeStreamEnd(bytes: Uint8Array): StreamEnd {
  const fail = (why: string): never => {
    throw new WeightSyncHeaderError(`malformed weight-sync stream end: ${why}`);
  };
  if (bytes.byteLength < FIXED_BYTES) fail(`${bytes.byteLength} bytes, shorter than ${FIXED_BYTES}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint16(4, true);
  if (version !== HEADER_VERSION) fail(`unsupported version ${version} (this build reads ${HEADER_VERSION})`);
  const flags = view.getUint16(6, true);
  if ((flags & ~FLAG_FAILED) !== 0) fail(`unknown flags 0x${flags.toString(16)}`);
  const length = view.getUint32(20, true);
  if (length > MAX_MESSAGE_BYTES || FIXED_BYTES + length !== bytes.byteLength) {
    fail(`message length ${length} does not match the ${bytes.byteLength}-byte record`);
  }
  if ((flags & FLAG_FAILED) !== 0) {
    return { failed: true, error: decoder.decode(bytes.subarray(FIXED_BYTES)) };
  }
  if (length !== 0) fail('a stream end that did not fail carries a message');
  return {
    failed: false,
    buckets: view.getUint32(8, true),
    tensors: view.getUint32(12, true),
    digest: view.getUint32(16, true),
  };
}

/** The UTF-8 of `text`, cut to at most `max` bytes (a cut character decodes as U+FFFD). */
function truncateUtf8(text: string, max: number): Uint8Array {
  const bytes = encoder.encode(text);
  return bytes.byteLength <= max ? bytes : bytes.subarray(0, max);
}
