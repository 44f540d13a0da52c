/**
 * Shares SharedArrayBuffers between the ranks of one job so a consumer can map
 * a producer's tensor without copying. A buffer is announced once on a
 * BroadcastChannel (which shares, not copies, a SharedArrayBuffer) and is then
 * named by (owner rank, id) in slot descriptors. When the owner's buffer is
 * garbage collected, a release message lets the other ranks drop theirs.
 */
import { BroadcastChannel } from 'node:worker_threads';
import type { AbortWord } from '../runtime/abort-word.ts';
import { CommTimeoutError } from '../runtime/errors.ts';

type Announcement =
  | { kind: 'share'; owner: number; id: number; buffer: SharedArrayBuffer }
  | { kind: 'release'; owner: number; id: number };

const POLL_MS = 50;

/** One number per (owner, id): ids stay far below 2^32 and ranks below 2^21, so it is exact. */
function keyOf(owner: number, id: number): number {
  return owner * 2 ** 32 + id;
}

export class SharedBufferRegistry {
  readonly #channel: BroadcastChannel;
  readonly #owner: number;
  readonly #ownIds = new WeakMap<SharedArrayBuffer, number>();
  readonly #own = new Map<number, WeakRef<SharedArrayBuffer>>();
  readonly #peers = new Map<number, SharedArrayBuffer>();
  readonly #arrivals = new Map<number, Array<() => void>>();
  readonly #finalizer: FinalizationRegistry<number>;
  #nextId = 1;
  #closed = false;

  constructor(channelName: string, owner: number) {
    this.#owner = owner;
    this.#channel = new BroadcastChannel(channelName);
    this.#channel.onmessage = (event: unknown) => this.#receive((event as { data: Announcement }).data);
    // A rank with nothing else pending must still be able to exit.
    (this.#channel as unknown as { unref(): void }).unref();
    this.#finalizer = new FinalizationRegistry((id) => {
      this.#own.delete(id);
      if (!this.#closed)
        this.#channel.postMessage({ kind: 'release', owner: this.#owner, id } satisfies Announcement);
    });
  }

  get owner(): number {
    return this.#owner;
  }

  /** The id peers know this rank's buffer by, announcing it on first use. */
  idOf(buffer: SharedArrayBuffer): number {
    const known = this.#ownIds.get(buffer);
    if (known !== undefined) return known;
    const id = this.#nextId++;
    this.#ownIds.set(buffer, id);
    this.#own.set(id, new WeakRef(buffer));
    this.#finalizer.register(buffer, id);
    this.#channel.postMessage({ kind: 'share', owner: this.#owner, id, buffer } satisfies Announcement);
    return id;
  }

  /** The buffer behind (owner, id) if it has arrived already. */
  known(owner: number, id: number): SharedArrayBuffer | undefined {
    return owner === this.#owner ? this.#own.get(id)?.deref() : this.#peers.get(keyOf(owner, id));
  }

  /** The buffer behind (owner, id); waits for its announcement if it is still in flight. */
  async resolve(
    owner: number,
    id: number,
    deadline: number,
    abort: AbortWord | undefined,
  ): Promise<SharedArrayBuffer> {
    const key = keyOf(owner, id);
    for (;;) {
      const found = this.known(owner, id);
      if (found) return found;
      abort?.throwIfAborted();
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        throw new CommTimeoutError(
          `rank ${this.#owner}: buffer ${owner}:${id} announced by rank ${owner} never arrived`,
        );
      }
      await new Promise<void>((wake) => {
        const timer = setTimeout(done, Math.min(remaining, POLL_MS));
        const waiting = this.#arrivals.get(key) ?? [];
        waiting.push(done);
        this.#arrivals.set(key, waiting);
        function done() {
          clearTimeout(timer);
          wake();
        }
      });
      this.#arrivals.delete(key);
    }
  }

  #receive(message: Announcement): void {
    const key = keyOf(message.owner, message.id);
    if (message.kind === 'release') {
      this.#peers.delete(key);
      return;
    }
    this.#peers.set(key, message.buffer);
    for (const wake of this.#arrivals.get(key) ?? []) wake();
  }

  /** How many peer buffers this rank still holds (exposed so tests can check that releases arrive). */
  get heldPeerBuffers(): number {
    return this.#peers.size;
  }

  close(): void {
    this.#closed = true;
    this.#channel.close();
    this.#peers.clear();
  }
}
