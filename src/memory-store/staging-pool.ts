/**
 * Shared buffers for staging host tensors that do not live in a
 * SharedArrayBuffer (peers cannot map those). Buffers come in power-of-two
 * size classes and are kept for reuse up to a byte cap, so a loop that sends
 * the same unshared tensor does not allocate (or re-announce) every time.
 */
const MIN_CLASS_BYTES = 1 << 16;

export class StagingPool {
  readonly #idle = new Map<number, SharedArrayBuffer[]>();
  #idleBytes = 0;

  constructor(readonly maxIdleBytes: number = 256 << 20) {}

  lease(bytes: number): SharedArrayBuffer {
    const size = Math.max(MIN_CLASS_BYTES, 2 ** Math.ceil(Math.log2(Math.max(1, bytes))));
    const reused = this.#idle.get(size)?.pop();
    if (reused) {
      this.#idleBytes -= size;
      return reused;
    }
    return new SharedArrayBuffer(size);
  }

  giveBack(buffer: SharedArrayBuffer): void {
    if (this.#idleBytes + buffer.byteLength > this.maxIdleBytes) return;
    const list = this.#idle.get(buffer.byteLength) ?? [];
    list.push(buffer);
    this.#idle.set(buffer.byteLength, list);
    this.#idleBytes += buffer.byteLength;
  }

  clear(): void {
    this.#idle.clear();
    this.#idleBytes = 0;
  }
}
