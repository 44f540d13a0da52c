/**
 * The rendezvous server's budget for frames still arriving, shared by all
 * its connections: a frame reserves its declared length before its body is
 * buffered, so however many peers send large frames at once, the server holds
 * at most the budget. A frame that does not fit waits its turn, first come
 * first served (so small frames cannot starve a large one), while its
 * connection goes unread; the frame timeout bounds how long any holder keeps
 * its share.
 */
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
    if (this.queue.length === 0 && this.used + bytes <= this.capacity) {
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
    while (this.queue.length > 0 && this.used + this.queue[0].bytes <= this.capacity) {
      const next = this.queue.shift() as Waiter;
      this.used += next.bytes;
      next.grant();
    }
  }
}
