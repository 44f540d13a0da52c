/**
 * Splits a message value into its tensors and a "skeleton": the same value
 * with every tensor replaced by a placeholder, so the skeleton can travel as a
 * structured clone while tensor bytes travel as tensors. Arrays and plain
 * objects are walked (shared and cyclic references are kept, as structured
 * clone keeps them); anything else is left to v8.serialize.
 */
import { Tensor } from '../tensor/tensor.ts';
import { assertCommTensor } from '../tensor/validate.ts';
import { P2PHeaderError } from './errors.ts';

/** The key of a placeholder object; a user value holding it would be ambiguous, so it is refused. */
export const PLACEHOLDER_KEY = '\u0000tensorcomm.tensor';
/** Deeper nesting is refused rather than risking the stack on either end. */
const MAX_DEPTH = 1_000;

export interface Split {
  skeleton: unknown;
  tensors: Tensor[];
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Tensors in depth-first order and the skeleton; a non-contiguous tensor is a TypeError naming `where`. */
export function splitValue(value: unknown, where: string): Split {
  const tensors: Tensor[] = [];
  const copies = new Map<object, unknown>();
  const walk = (v: unknown, path: string, depth: number): unknown => {
    if (v instanceof Tensor) {
      assertCommTensor(v, `${where}: ${path}`);
      tensors.push(v);
      return { [PLACEHOLDER_KEY]: tensors.length - 1 };
    }
    if (typeof v !== 'object' || v === null) return v;
    if (!Array.isArray(v) && !isPlainObject(v)) return v;
    const seen = copies.get(v);
    if (seen !== undefined) return seen;
    if (depth > MAX_DEPTH)
      throw new RangeError(`${where}: ${path} is nested deeper than ${MAX_DEPTH} levels`);
    if (Array.isArray(v)) {
      const copy: unknown[] = [];
      copies.set(v, copy);
      for (let i = 0; i < v.length; i++) copy.push(walk(v[i], `${path}[${i}]`, depth + 1));
      return copy;
    }
    if (Object.hasOwn(v, PLACEHOLDER_KEY)) {
      throw new TypeError(`${where}: ${path} uses the reserved key ${JSON.stringify(PLACEHOLDER_KEY)}`);
    }
    const copy: Record<string, unknown> = {};
    copies.set(v, copy);
    for (const key of Object.keys(v)) copy[key] = walk(v[key], `${path}.${key}`, depth + 1);
    return copy;
  };
  return { skeleton: walk(value, 'value', 0), tensors };
}

/**
 * Puts received tensors back where their placeholders are, in place. Each
 * tensor must be referenced exactly once, else the header is malformed.
 */
export function fillSkeleton(skeleton: unknown, tensors: readonly Tensor[]): unknown {
  const used = new Uint8Array(tensors.length);
  const seen = new Set<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v !== 'object' || v === null || seen.has(v)) return v;
    if (depth > MAX_DEPTH)
      throw new P2PHeaderError(`malformed p2p skeleton: nested deeper than ${MAX_DEPTH}`);
    if (Array.isArray(v)) {
      seen.add(v);
      for (let i = 0; i < v.length; i++) v[i] = walk(v[i], depth + 1);
      return v;
    }
    if (!isPlainObject(v)) return v;
    if (Object.hasOwn(v, PLACEHOLDER_KEY)) return tensorAt(v[PLACEHOLDER_KEY]);
    seen.add(v);
    for (const key of Object.keys(v)) v[key] = walk(v[key], depth + 1);
    return v;
  };
  const tensorAt = (index: unknown): Tensor => {
    if (!Number.isInteger(index) || (index as number) < 0 || (index as number) >= tensors.length) {
      throw new P2PHeaderError(`malformed p2p skeleton: placeholder ${String(index)} of ${tensors.length}`);
    }
    if (used[index as number]++)
      throw new P2PHeaderError(`malformed p2p skeleton: tensor ${index} used twice`);
    return tensors[index as number];
  };
  const value = walk(skeleton, 0);
  const missing = used.indexOf(0);
  if (missing >= 0) throw new P2PHeaderError(`malformed p2p skeleton: tensor ${missing} has no placeholder`);
  return value;
}
