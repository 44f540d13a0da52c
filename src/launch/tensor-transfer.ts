/**
 * Tensors inside a value that crosses to or from a rank (spawnThreads' args,
 * a rank's return value): a structured clone would keep a Tensor's public
 * fields and drop its storage, so they travel as dtype, shape and a copy of
 * their bytes, and come back as host tensors. GPU tensors arrive on the host
 * (the launcher may have no GPU). Arrays, plain objects, Maps and Sets are
 * walked; every other value travels as the structured clone has it.
 */
import type { DType } from '../tensor/dtype.ts';
import { Tensor } from '../tensor/tensor.ts';

const MARK = '__tensorcomm_tensor__';

interface PackedTensor {
  [MARK]: { dtype: DType; shape: number[]; bytes: Uint8Array };
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Maps every Tensor, Array, plain object, Map and Set inside `value`, keeping shared references and cycles. */
function walk(value: unknown, leaf: (v: object) => unknown | undefined, seen: Map<object, unknown>): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const known = seen.get(value);
  if (known !== undefined) return known;
  const replaced = leaf(value);
  if (replaced !== undefined) {
    seen.set(value, replaced);
    return replaced;
  }
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    seen.set(value, out);
    for (const item of value) out.push(walk(item, leaf, seen));
    return out;
  }
  if (value instanceof Map) {
    const out = new Map();
    seen.set(value, out);
    for (const [k, v] of value) out.set(walk(k, leaf, seen), walk(v, leaf, seen));
    return out;
  }
  if (value instanceof Set) {
    const out = new Set();
    seen.set(value, out);
    for (const v of value) out.add(walk(v, leaf, seen));
    return out;
  }
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = Object.create(Object.getPrototypeOf(value));
  seen.set(value, out);
  for (const [k, v] of Object.entries(value)) out[k] = walk(v, leaf, seen);
  return out;
}

function pack(value: object): PackedTensor | undefined {
  if (!(value instanceof Tensor)) return undefined;
  const host = value.device === 'cpu' ? value.contiguous() : value.to('cpu');
  // A copy in a buffer of its own: the rank's storage is shared memory the rank may reuse, or another process's.
  return { [MARK]: { dtype: host.dtype, shape: host.shape.slice(), bytes: host.bytes().slice() } };
}

function unpack(value: object): Tensor | undefined {
  if (!Object.hasOwn(value, MARK)) return undefined;
  const { dtype, shape, bytes } = (value as PackedTensor)[MARK];
  const tensor = Tensor.empty(shape, dtype);
  tensor.bytes().set(bytes);
  return tensor;
}

/** `value` with its Tensors replaced by what a structured clone carries whole. */
export function packTensors(value: unknown): unknown {
  return walk(value, pack, new Map());
}

/** The inverse of packTensors, on the structured clone of its result. */
export function unpackTensors(value: unknown): unknown {
  return walk(value, unpack, new Map());
}
