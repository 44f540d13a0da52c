/**
 * Source maps cut down to one mapping per generated line, for the bundle
 * chunks that hold only this library's own code. Node parses the source map
 * of every module it loads while source maps are on, in every rank thread:
 * the library chunk's full map (some 75,000 mappings, one per token) took
 * 10 MB of each thread's heap, 640 MB for 64 ranks. A stack frame needs the
 * file and line, which the first mapping of a line gives (the bundle is not
 * minified: a generated line holds one source line), so only a frame's
 * column becomes approximate, and only in library frames.
 *
 * Mappings are Base64 VLQ (the Source Map v3 format): lines separated by
 * `;`, segments by `,`, each segment 1, 4 or 5 signed numbers; the first is
 * the generated column relative to the previous segment of its line, the
 * others (source, original line, original column, name) relative to the
 * previous segment that has them, across lines.
 */

const DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const VALUE_OF = new Map([...DIGITS].map((digit, value) => [digit, value]));
const CONTINUE = 32;

/** The numbers of one segment. */
function decodeSegment(segment: string): number[] {
  const numbers: number[] = [];
  let value = 0;
  let shift = 0;
  for (const digit of segment) {
    const bits = VALUE_OF.get(digit);
    if (bits === undefined) throw new Error(`source map: '${digit}' is not a Base64 VLQ digit`);
    value += (bits & (CONTINUE - 1)) * 2 ** shift;
    shift += 5;
    if (bits & CONTINUE) continue;
    numbers.push(value & 1 ? -Math.floor(value / 2) : value / 2);
    value = 0;
    shift = 0;
  }
  if (shift !== 0) throw new Error(`source map: segment '${segment}' ends inside a number`);
  return numbers;
}

function encodeNumber(n: number): string {
  let value = n < 0 ? -2 * n + 1 : 2 * n;
  let out = '';
  do {
    const bits = value % CONTINUE;
    value = Math.floor(value / CONTINUE);
    out += DIGITS[value > 0 ? bits | CONTINUE : bits];
  } while (value > 0);
  return out;
}

/**
 * `mappings` with only the first segment of each generated line that has
 * one, re-encoded (the relative fields now count from the kept segments).
 */
export function firstMappingPerLine(mappings: string): string {
  // Absolute source, original line, original column and name as decoding goes, and as last written.
  const read = [0, 0, 0, 0];
  const written = [0, 0, 0, 0];
  const lines: string[] = [];
  for (const line of mappings.split(';')) {
    let kept = '';
    for (const segment of line.split(',')) {
      if (segment === '') continue;
      const numbers = decodeSegment(segment);
      for (let i = 1; i < numbers.length; i++) read[i - 1] += numbers[i];
      if (kept !== '') continue;
      // The first segment's column counts from the start of its line.
      kept = encodeNumber(numbers[0]);
      for (let i = 1; i < numbers.length; i++) {
        kept += encodeNumber(read[i - 1] - written[i - 1]);
        written[i - 1] = read[i - 1];
      }
    }
    lines.push(kept);
  }
  return lines.join(';');
}
