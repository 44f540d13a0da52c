/**
 * Bounds every TensorStore keeps, so a key, a tag or an error text has the
 * same limit between threads as between processes, and records stay fixed-size.
 */

export const MAX_KEY_BYTES = 128;
export const MAX_TAG_BYTES = 256;
export const MAX_ERROR_BYTES = 384;
export const MAX_DIMS = 16;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** UTF-8 of `text`; keys and signatures are ASCII in practice, so that path avoids TextEncoder. */
export function encodeText(text: string): Uint8Array {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return encoder.encode(text);
    bytes[i] = c;
  }
  return bytes;
}

/** The text of UTF-8 bytes[start, end), which may lie in shared memory; ASCII (the usual case) without TextDecoder. */
export function decodeText(bytes: Uint8Array, start = 0, end = bytes.length): string {
  let ascii = true;
  for (let i = start; i < end && ascii; i++) ascii = bytes[i] < 0x80;
  // Decoding needs an unshared copy; these texts are a few hundred bytes at most.
  if (!ascii) return decoder.decode(bytes.slice(start, end));
  return String.fromCharCode.apply(null, bytes.subarray(start, end) as unknown as number[]);
}

/**
 * The UTF-8 of a key, refused (naming the call) unless it is 1..MAX_KEY_BYTES
 * long: the one bound every TensorStore puts on keys.
 */
export function encodeKey(key: string, where: () => string): Uint8Array {
  if (typeof key !== 'string') throw new TypeError(`${where()}: key must be a string, got ${typeof key}`);
  const bytes = encodeText(key);
  if (bytes.length === 0 || bytes.length > MAX_KEY_BYTES) {
    throw new RangeError(`${where()}: key must be 1..${MAX_KEY_BYTES} bytes of UTF-8, got ${bytes.length}`);
  }
  // A lone surrogate has no UTF-8: the encoder would write U+FFFD, and two keys would meet.
  if (bytes.length !== key.length && LONE_SURROGATE.test(key)) {
    throw new TypeError(`${where()}: key is not valid Unicode`);
  }
  return bytes;
}

const LONE_SURROGATE = /\p{Cs}/u;

/** UTF-8 of `text`, cut on a character boundary to at most `maxBytes`. */
export function encodeBounded(text: string, maxBytes: number): Uint8Array {
  const bytes = encodeText(text);
  if (bytes.length <= maxBytes) return bytes;
  // Cut on a character boundary so the truncated text still decodes.
  let end = maxBytes;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}
