/**
 * The rendezvous server's budget for frames still arriving, shared by all
 * its connections: a frame reserves its declared length before its body is
 * buffered, so however many peers send large frames at once, the server holds
 * at most the budget. A frame that does not fit waits its turn while its
 * connection goes unread: large frames first come first served (so a stream
 * of smaller ones cannot starve a large one), small ones past them whenever
 * they fit (so a heartbeat does not wait behind a flood of large frames).
 * The frame timeout bounds how long any holder keeps its share.
 */
/** Frames up to this size may pass large ones waiting for the budget. */
export const SMALL_FRAME_BYTES = 64 * 1024;

interface Waiter {
  bytes: number;
  grant(): void;
}

export class FrameBudget {
  private used = 0;
  private readonly queue: Waiter[] = [];

  constructor(readonly capacity: number) {}

  /** Bytes reserved now. */
  get usedBytes(): number {
    return this.used;
  }

  /** True when `bytes` are reserved at once; otherwise `grant` is called once they are, unless cancelled first. */
  reserve(bytes: number, grant: () => void): boolean {
    if ((this.queue.length === 0 || bytes <= SMALL_FRAME_BYTES) && this.used + bytes <= this.capacity) {
      this.used += bytes;
      return true;
    }
    this.queue.push({ bytes, grant });
    return false;
  }

  release(bytes: number): void {
    if (bytes === 0) return;
    this.used -= bytes;
    this.serveQueue();
  }

  /** Withdraws a reservation still waiting (its connection closed). */
  cancel(grant: () => void): void {
    const at = this.queue.findIndex((w) => w.grant === grant);
    if (at < 0) return;
    this.queue.splice(at, 1);
    this.serveQueue();
  }

  private serveQueue(): void {
    for (let i = 0; i < this.queue.length; ) {
      const next = this.queue[i];
      const mayGo = i === 0 || next.bytes <= SMALL_FRAME_BYTES;
      if (!mayGo || this.used + next.bytes > this.capacity) {
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      this.used += next.bytes;
      next.grant();
    }
  }
}
