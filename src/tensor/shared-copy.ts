/**
 * Copies of blocks between shared and ordinary memory. V8 copies a typed
 * array whose buffer is a SharedArrayBuffer with relaxed atomic word moves,
 * well short of memmove's speed for blocks that fit in cache, and host
 * tensors live in shared memory: the SIMD reductions copy every 64 KiB block
 * in and out of wasm memory, so through V8 the copies, not the folds, would
 * set a large reduction's pace. The tensor layer cannot call C itself: an
 * upper layer registers a copy (runtime/native-copy.ts), asked for on the
 * first block that needs it, so a thread that never copies a large shared
 * block never loads it.
 */

/** Copies `length` bytes from `source` to `target`, both as long at least; synchronous. */
export type BlockCopy = (target: Uint8Array, source: Uint8Array, length: number) => unknown;

/** Blocks shorter than this go through TypedArray.set: a native call costs more than it saves there. */
export const NATIVE_COPY_MIN_BYTES = 16 << 10;

let provide: (() => BlockCopy | undefined) | undefined;
/** Undefined until first asked for, null where the provider has none. */
let native: BlockCopy | null | undefined;

/** Sets what supplies the native copy (replacing any earlier one); it is called at most once, when first needed. */
export function registerSharedCopy(provider: (() => BlockCopy | undefined) | undefined): void {
  provide = provider;
  native = undefined;
}

const isShared = (x: Uint8Array) => x.buffer instanceof SharedArrayBuffer;

/** target.set(source, offset), through the registered copy where either side is shared and the block large. */
export function copyInto(target: Uint8Array, source: Uint8Array, offset = 0): void {
  const length = source.length;
  if (length >= NATIVE_COPY_MIN_BYTES && (isShared(source) || isShared(target))) {
    if (native === undefined) native = provide?.() ?? null;
    if (native !== null) {
      if (offset + length > target.length) throw new RangeError('copyInto: source does not fit in target');
      native(offset === 0 ? target : target.subarray(offset), source, length);
      return;
    }
  }
  target.set(source, offset);
}

/** Up to this many bytes a loop copies faster than a subarray view and a set() (two allocations and a native call). */
const LOOP_COPY_MAX_BYTES = 64;

/** Copies `length` bytes from `source` at `sourceOffset` to `target` at `targetOffset` (both in range). */
export function copyBytes(
  target: Uint8Array,
  targetOffset: number,
  source: Uint8Array,
  sourceOffset: number,
  length: number,
): void {
  if (length <= LOOP_COPY_MAX_BYTES) {
    for (let i = 0; i < length; i++) target[targetOffset + i] = source[sourceOffset + i];
    return;
  }
  const whole = sourceOffset === 0 && length === source.length;
  copyInto(target, whole ? source : source.subarray(sourceOffset, sourceOffset + length), targetOffset);
}
