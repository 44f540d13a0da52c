/**
 * Reading a predict report back (`tensorcomm predict show / diff`): the JSON
 * is checked field by field, so a hand-edited or truncated file fails with the
 * file and the field's path (`predict.json: calls[3].endUs: expected a finite
 * number, got "x"`) instead of printing NaN columns. Keys the report does not
 * define are ignored, so a report from a later version with more fields still
 * reads.
 */
import { readFileSync } from 'node:fs';
import type { PredictedCall, PredictedRank, PredictReport } from './report.ts';

export function readPredictReport(file: string): PredictReport {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`${file}: cannot be read: ${(error as Error).message}`, { cause: error });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new TypeError(`${file}: not JSON: ${(error as Error).message}`, { cause: error });
  }
  return checkPredictReport(value, file);
}

/** `value` as a PredictReport, or a TypeError naming `source` and the first bad field. */
export function checkPredictReport(value: unknown, source: string): PredictReport {
  const fail = (path: string, problem: string): never => {
    throw new TypeError(`${source}: ${path}: ${problem}`);
  };
  if (!isObject(value) || !('topology' in value && 'ranks' in value && 'calls' in value)) {
    const found = isObject(value) ? `keys: ${Object.keys(value).join(', ') || 'none'}` : describe(value);
    throw new TypeError(
      `${source}: not a predict report (expected an object with "topology", "ranks" and "calls"; found ${found})`,
    );
  }
  const root = new Fields(value, '', fail);
  const topology = root.string('topology');
  const ranks = root.array('ranks').map((item, i) => checkRank(Fields.of(item, `ranks[${i}]`, fail)));
  if (ranks.length === 0) fail('ranks', 'expected at least one rank');
  const known = new Set<number>();
  ranks.forEach(({ rank }, i) => {
    if (known.has(rank)) fail(`ranks[${i}].rank`, `rank ${rank} is listed twice`);
    known.add(rank);
  });
  const calls = root.array('calls').map((item, i) => checkCall(Fields.of(item, `calls[${i}]`, fail)));
  calls.forEach((call, i) => {
    if (!known.has(call.rank)) fail(`calls[${i}].rank`, `rank ${call.rank} is not in ranks`);
  });
  return { topology, ranks, calls };
}

function checkRank(o: Fields): PredictedRank {
  return {
    rank: o.count('rank'),
    endUs: o.amount('endUs'),
    computeUs: o.amount('computeUs'),
    commUs: o.amount('commUs'),
    exposedCommUs: o.amount('exposedCommUs'),
    waitUs: o.amount('waitUs'),
  };
}

function checkCall(o: Fields): PredictedCall {
  const call: PredictedCall = {
    rank: o.count('rank'),
    group: o.string('group'),
    seq: o.count('seq'),
    op: o.string('op'),
    bytes: o.count('bytes'),
    algorithm: o.string('algorithm'),
    protocol: o.string('protocol'),
    startUs: o.amount('startUs'),
    endUs: o.amount('endUs'),
    busbwGBps: o.amount('busbwGBps'),
  };
  if (call.endUs < call.startUs) o.fail('endUs', `${call.endUs} is before startUs (${call.startUs})`);
  if (o.has('peer')) call.peer = o.count('peer');
  return call;
}

/** One object of the report, read key by key; every failure names the key's full path. */
class Fields {
  constructor(
    readonly value: Record<string, unknown>,
    readonly path: string,
    readonly report: (path: string, problem: string) => never,
  ) {}

  static of(value: unknown, path: string, report: (path: string, problem: string) => never): Fields {
    if (!isObject(value)) report(path, `expected an object, got ${describe(value)}`);
    return new Fields(value as Record<string, unknown>, path, report);
  }

  fail(key: string, problem: string): never {
    return this.report(this.path ? `${this.path}.${key}` : key, problem);
  }

  has(key: string): boolean {
    return this.value[key] !== undefined;
  }

  array(key: string): unknown[] {
    const v = this.value[key];
    return Array.isArray(v) ? v : this.fail(key, `expected an array, got ${describe(v)}`);
  }

  string(key: string): string {
    const v = this.value[key];
    return typeof v === 'string' ? v : this.fail(key, `expected a string, got ${describe(v)}`);
  }

  /** Microseconds or a bandwidth: finite and not negative. */
  amount(key: string): number {
    const v = this.value[key];
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      return this.fail(key, `expected a finite number, got ${describe(v)}`);
    }
    return v >= 0 ? v : this.fail(key, `expected a number >= 0, got ${v}`);
  }

  /** Ranks, sequence numbers and byte counts. */
  count(key: string): number {
    const v = this.value[key];
    return Number.isSafeInteger(v) && (v as number) >= 0
      ? (v as number)
      : this.fail(key, `expected an integer >= 0, got ${describe(v)}`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A wrong value, short enough for one line. */
function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  if (isObject(value)) return 'an object';
  return JSON.stringify(value);
}
