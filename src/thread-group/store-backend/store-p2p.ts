/**
 * StoreP2P: a StoreBackend's point-to-point calls. Every message of a stream
 * (src, dst, tag) is numbered on both ends (p2p.ts). Where the group's ranks
 * map common memory (threads sharing a MemoryTensorStore, processes of one
 * node sharing its files: mailbox-memory.ts) each message goes through the
 * pair's mailbox (mailbox.ts): inline when small, else a marker ahead of its
 * value in the keyed store; elsewhere through the keyed store alone. Here too: recvFromAny's choice of sender, and receives that lend the
 * sender's value instead of copying it.
 */
import type { TensorStore } from '../../runtime/tensor-store.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import {
  type BorrowedTensor,
  type BorrowedViews,
  type CallInfo,
  COMPLETED,
  type GroupView,
  NOTHING_HELD,
} from '../backend.ts';
import { TELL_TIMEOUT_MS } from './abandon.ts';
import { layoutMismatchError } from './call-failure.ts';
import { Exchange, runExchange } from './exchange.ts';
import { MAIL, Mailbox, type MailRecord, RECEIVED_INTO } from './mailbox.ts';
import { type MailboxMemory, mailboxMemory } from './mailbox-memory.ts';
import { expectInline, inlineTensor, landInline } from './mailbox-p2p.ts';
import { firstMessage, receive, recv, StreamCounters, send } from './p2p.ts';
import { takeCopy } from './variable.ts';

/** Tag compared between the two ends of a point-to-point message; shapes are checked separately. */
const P2P_SIGNATURE = 'p2p';

export class StoreP2P {
  readonly #store: TensorStore;
  readonly #group: GroupView;
  readonly #sent = new StreamCounters();
  readonly #received = new StreamCounters();
  /**
   * Per tag, the recvFromAny calls still choosing their sender: receives on
   * that tag made after one wait until it chose, so messages match receives
   * in the order the receives were made (MPI's rule for any-source receives).
   */
  readonly #choosing = new Map<number, Promise<void>>();
  /** Where messages go first when every member maps common memory (see mailbox.ts). */
  readonly #mailbox: Mailbox | undefined;
  readonly #memory: MailboxMemory | undefined;

  /** `mailbox`: whether to use one where the store offers memory every member maps. */
  constructor(store: TensorStore, group: GroupView, mailbox: boolean) {
    this.#store = store;
    this.#group = group;
    this.#memory = mailbox ? mailboxMemory(store, `${group.id}:mail`, group.ranks, group.rank) : undefined;
    this.#mailbox = this.#memory && new Mailbox(this.#memory, group);
  }

  /** The group is destroyed on this rank: what it holds of the mailboxes goes. */
  destroy(): void {
    this.#memory?.release();
  }

  /** The exchange of message `message` of stream (src → dst, tag) in the keyed store. */
  #exchange(call: CallInfo, src: number, dst: number, message: number, tag: number): Exchange {
    const prefix = `${this.#group.id}:p${src}>${dst}:${tag}:${message}`;
    return new Exchange(this.#store, this.#group, { ...call, signature: P2P_SIGNATURE }, prefix);
  }

  send(call: CallInfo, tensor: Tensor, dst: number, tag: number): Promise<void> {
    const message = this.#sent.take(this.#group.rank, dst, tag);
    const mailbox = this.#mailbox;
    const inline = mailbox?.carriesInline(tensor) && mailbox.sendInline(call, dst, tag, message, tensor);
    if (inline) return inline;
    return this.#sendStored(call, dst, tag, message, (x) => send(x, tensor, dst));
  }

  /** Backend.sendEarly: an inline message the mailbox has room for now. */
  sendEarly(tensor: Tensor, dst: number, tag: number): number {
    const mailbox = this.#mailbox;
    if (!mailbox?.carriesInline(tensor)) return 0;
    const me = this.#group.rank;
    const ticket = mailbox.sendEarly(dst, tag, this.#sent.peek(me, dst, tag), tensor);
    if (ticket !== 0) this.#sent.take(me, dst, tag);
    return ticket;
  }

  awaitEarlySend(call: CallInfo, dst: number, ticket: number): Promise<void> {
    return (this.#mailbox as Mailbox).acknowledged(call, dst, ticket);
  }

  /** Message `message` to `dst` through the keyed store, announced first by a marker in the mailbox if any. */
  async #sendStored(
    call: CallInfo,
    dst: number,
    tag: number,
    message: number,
    algorithm: (x: Exchange) => Promise<void>,
  ): Promise<void> {
    await this.#mailbox?.post(call, dst, tag, message);
    return runExchange(this.#exchange(call, this.#group.rank, dst, message, tag), algorithm);
  }

  /** The number of the next message from `src` on `tag`, once no earlier recvFromAny on `tag` is still choosing. */
  #nextMessage(src: number, tag: number): number | Promise<number> {
    // No named closure on this path: in a rank bundle (keepNames) each would cost a defineProperty per call.
    const choosing = this.#choosing.get(tag);
    if (!choosing) return this.#received.take(src, this.#group.rank, tag);
    return choosing.then(() => this.#received.take(src, this.#group.rank, tag));
  }

  /**
   * The next message from `src` on `tag`: handed to `inline` when it came in
   * the mailbox with its bytes, else to `stored` with the exchange of its key.
   */
  #receive<T>(
    call: CallInfo,
    src: number,
    tag: number,
    inline: (record: MailRecord) => T,
    stored: (x: Exchange) => Promise<T>,
  ): Promise<T> {
    const message = this.#nextMessage(src, tag);
    if (typeof message === 'number') return this.#receiveMessage(call, src, tag, message, inline, stored);
    return message.then((m) => this.#receiveMessage(call, src, tag, m, inline, stored));
  }

  #receiveMessage<T>(
    call: CallInfo,
    src: number,
    tag: number,
    message: number,
    inline: (record: MailRecord) => T,
    stored: (x: Exchange) => Promise<T>,
    waited = false,
  ): Promise<T> {
    const mailbox = this.#mailbox;
    if (!mailbox) return this.#viaStore(call, src, tag, message, stored);
    return settled(() => {
      const got = mailbox.receive(
        call,
        src,
        tag,
        message,
        (record) => (record.kind === MAIL.inline ? { value: inline(record) } : undefined),
        waited,
      );
      if (got instanceof Promise) {
        return got.then((g) => (g ? g.value : this.#viaStore(call, src, tag, message, stored)));
      }
      return got ? got.value : this.#viaStore(call, src, tag, message, stored);
    });
  }

  /** Message `message` from `src` as the keyed store holds it, handed to `stored`. */
  #viaStore<T>(
    call: CallInfo,
    src: number,
    tag: number,
    message: number,
    stored: (x: Exchange) => Promise<T>,
  ): Promise<T> {
    return stored(this.#exchange(call, src, this.#group.rank, message, tag));
  }

  recv(call: CallInfo, tensor: Tensor, src: number, tag: number): Promise<void> {
    const mailbox = this.#mailbox;
    if (!mailbox || this.#choosing.has(tag))
      return this.#receive(call, src, tag, ...this.#landing(call, tensor, src));
    // A message that is (or comes within the brief wait) next in the mailbox, inline: copied in at once.
    const message = this.#received.take(src, this.#group.rank, tag);
    const into = mailbox.receiveInto(call, src, tag, message, tensor);
    if (into === RECEIVED_INTO.landed) return COMPLETED;
    const [inline, stored] = this.#landing(call, tensor, src);
    return this.#receiveMessage(call, src, tag, message, inline, stored, into === RECEIVED_INTO.notCome);
  }

  /** What recv does with its message into `tensor`: for one that came inline, and for one in the store. */
  #landing(
    call: CallInfo,
    tensor: Tensor,
    src: number,
  ): [(record: MailRecord) => void, (x: Exchange) => Promise<void>] {
    return [
      (record) => landInline(this.#group, call, record, tensor, src),
      (x) => runExchange(x, (ex) => recv(ex, tensor, src)),
    ];
  }

  /**
   * Takes the first message to come on `tag` from any peer, then receives it
   * as recv does. Receives on `tag` made after this one wait until it chose.
   */
  async recvFromAny(call: CallInfo, tensor: Tensor, tag: number): Promise<number> {
    const me = this.#group.rank;
    const earlier = this.#choosing.get(tag);
    let chosen!: () => void;
    const choice = new Promise<void>((resolve) => {
      chosen = resolve;
    });
    const mine = earlier ? earlier.then(() => choice) : choice;
    this.#choosing.set(tag, mine);
    const mailbox = this.#mailbox;
    let src!: number;
    let message!: number;
    let taken: { x: Exchange; value: Tensor } | undefined;
    try {
      await earlier;
      const peers = Array.from({ length: this.#group.size }, (_, p) => p).filter((p) => p !== me);
      if (mailbox) {
        src = await firstMessage(peers, call, this.#group, (p) =>
          mailbox.has(p, tag, this.#received.peek(p, me, tag)) ? p : undefined,
        );
      } else {
        const exchanges = peers.map((p) => this.#exchange(call, p, me, this.#received.peek(p, me, tag), tag));
        [src, taken] = await firstMessage(peers, call, this.#group, async (p, i) => {
          const x = exchanges[i];
          try {
            const value = await x.tryGet(0, p);
            return value && ([p, { x, value }] as const);
          } catch (error) {
            await x.abort(error);
            throw error;
          }
        });
      }
      message = this.#received.take(src, me, tag);
    } finally {
      chosen();
      if (this.#choosing.get(tag) === mine) this.#choosing.delete(tag);
    }
    if (taken) {
      const { value } = taken;
      await runExchange(taken.x, (x) => receive(x, value, tensor, src));
    } else {
      await this.#receiveMessage(call, src, tag, message, ...this.#landing(call, tensor, src));
    }
    return src;
  }

  recvBorrowed(call: CallInfo, like: Tensor, src: number, tag: number): Promise<BorrowedTensor> {
    return this.#receive(
      call,
      src,
      tag,
      (record) => ({
        tensor: expectInline(this.#group, call, record, like, src).clone(),
        release: NOTHING_HELD,
      }),
      (x) =>
        this.#lend(x, src, async () => {
          const tensor = await x.get(0, src);
          x.expectLike(tensor, like, src);
          return { tensor };
        }),
    );
  }

  recvAnyBorrowed(call: CallInfo, src: number, tag: number): Promise<BorrowedTensor> {
    return this.#receive(
      call,
      src,
      tag,
      (record) => ({ tensor: inlineTensor(record).clone(), release: NOTHING_HELD }),
      (x) => this.#lend(x, src, async () => ({ tensor: await x.get(0, src) })),
    );
  }

  sendViews(call: CallInfo, tensors: readonly Tensor[], dst: number, tag: number): Promise<void> {
    const message = this.#sent.take(this.#group.rank, dst, tag);
    return this.#sendStored(call, dst, tag, message, async (x) => {
      await x.publishViews(0, tensors, [dst]);
      await x.consumed(0);
    });
  }

  recvViews(call: CallInfo, src: number, tag: number): Promise<BorrowedViews> {
    return this.#receive(
      call,
      src,
      tag,
      (record) => {
        const sent = `${record.dtype}[${record.shape.join(',')}]`;
        throw layoutMismatchError(this.#group, call, 'a list of views (sendViews)', src, sent);
      },
      (x) => this.#lend(x, src, async () => ({ views: await x.getViews(0, src) })),
    );
  }

  /** The sender's value as the store hands it out on `x` (`take` reads and checks it), until release(). */
  async #lend<T>(
    x: Exchange,
    src: number,
    take: () => Promise<T>,
  ): Promise<T & { release(): Promise<void> }> {
    let value: T;
    try {
      value = await take();
    } catch (error) {
      await x.abort(error);
      throw error;
    }
    let released: Promise<void> | undefined;
    return {
      ...value,
      release: () => (released ??= runExchange(x, (ex) => ex.finish(0, src))),
    };
  }

  recvAny(call: CallInfo, src: number, tag: number): Promise<Tensor> {
    return this.#receive(
      call,
      src,
      tag,
      (record) => inlineTensor(record).clone(),
      async (x) => {
        let value: Tensor | undefined;
        await runExchange(x, async (ex) => {
          value = await takeCopy(ex, 0, src);
        });
        return value!;
      },
    );
  }

  /**
   * For a send that failed its local checks (see abandon.ts): the exchange in
   * the keyed store where its receive looks for this rank's error, announced
   * first by its marker in the mailbox.
   */
  async failedSend(call: CallInfo, dst: number, tag: number): Promise<Exchange> {
    const me = this.#group.rank;
    const message = this.#sent.take(me, dst, tag);
    await this.#mailbox?.post(call, dst, tag, message);
    return this.#exchange(call, me, dst, message, tag);
  }

  /**
   * For a receive that failed its local checks: the exchange in the keyed
   * store where its sender waits for this rank's error; undefined where the
   * message came inline and the sender was told through the mailbox.
   */
  async failedRecv(call: CallInfo, src: number, tag: number, error: Error): Promise<Exchange | undefined> {
    const me = this.#group.rank;
    const message = await this.#nextMessage(src, tag);
    const mailbox = this.#mailbox;
    if (mailbox) {
      // The message this receive was for leaves the mailbox. An inline one's send waits for this
      // receive's verdict, which is this rank's error; only a stored one is answered through the store.
      const bounded = { ...call, timeoutMs: Math.min(call.timeoutMs, TELL_TIMEOUT_MS) };
      // Only its message travels: the sender is told it in its verdict.
      const told = new Error(`rank ${this.#group.ranks[me]}: ${error.message}`);
      const stored = await settled(() =>
        mailbox.receive(bounded, src, tag, message, (record) => {
          if (record.kind === MAIL.inline) throw told;
          return true;
        }),
      ).catch(() => false);
      if (!stored) return undefined;
    }
    return this.#exchange(call, src, me, message, tag);
  }
}

/** `run()` as a promise: a fast path that completes at once still answers with a promise, and fails as one. */
function settled<T>(run: () => T | Promise<T>): Promise<T> {
  try {
    return Promise.resolve(run());
  } catch (error) {
    return Promise.reject(error);
  }
}
