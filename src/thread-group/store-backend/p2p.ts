/**
 * Point-to-point over a TensorStore. Each (sender, receiver, tag) stream has
 * its own message counter on both ends, so the n-th send matches the n-th
 * recv of that stream whatever else is in flight, and sends never wait for
 * unrelated receives (batchIsendIrecv cannot deadlock).
 */
import { CommTimeoutError, RankFailedError } from '../../runtime/errors.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CallInfo, GroupView } from '../backend.ts';
import { callWhere } from './call-failure.ts';
import { type Exchange, landOrCopy } from './exchange.ts';

/** The longest recvFromAny sleeps between looks at its peers' streams (it starts at 1 ms and doubles). */
const ANY_SOURCE_MAX_SLEEP_MS = 8;

export async function send(x: Exchange, tensor: Tensor, dst: number): Promise<void> {
  await x.publish(0, tensor, [dst]);
  await x.consumed(0);
}

export async function recv(x: Exchange, tensor: Tensor, src: number): Promise<void> {
  // Where the store can, the message is written straight into the receiver's tensor (one copy, not two).
  if (tensor.device === 'cpu' && tensor.isContiguous()) x.landIn(0, src, tensor);
  const value = await x.get(0, src);
  await receive(x, value, tensor, src);
}

/** Checks and copies a message taken from `src` (unless it landed in place), and finishes it. */
export async function receive(x: Exchange, value: Tensor, tensor: Tensor, src: number): Promise<void> {
  x.expectLike(value, tensor, src);
  landOrCopy(tensor, value);
  await x.finish(0, src);
}

/**
 * The first of the peers' next messages to be there: `look` tells whether
 * peer `p` (the i-th) has it, taking it where it says so, and this returns
 * what it said. A store waits on one key at a time, so this looks at each
 * stream in turn, then sleeps briefly: a message is seen within a few
 * milliseconds of its send. Fails at the call's timeout, or once every peer
 * has left.
 */
export async function firstMessage<V>(
  peers: readonly number[],
  call: CallInfo,
  group: GroupView,
  look: (p: number, i: number) => V | undefined | Promise<V | undefined>,
): Promise<V> {
  const deadline = performance.now() + call.timeoutMs;
  const where = callWhere(call, group);
  const me = `rank ${group.ranks[group.rank]}`;
  const monitor = call.debug?.monitor;
  let sleepMs = 1;
  const lookAll = async () => {
    for (let i = 0; i < peers.length; i++) {
      const found = await look(peers[i], i);
      if (found !== undefined) return found;
    }
    return undefined;
  };
  for (;;) {
    const found = await lookAll();
    if (found !== undefined) return found;
    const left = peers.map((p) => monitor?.departure(group.ranks[p]));
    if (left.every((d) => d !== undefined)) {
      // A rank leaves after all it sent: what one sent between the look above and its leaving shows now.
      const last = await lookAll();
      if (last !== undefined) return last;
      throw new RankFailedError(
        `${where}: ${me} waits for a message from any rank, but every other rank left: ${left[0]}`,
        undefined,
      );
    }
    const remaining = deadline - performance.now();
    if (remaining <= 0) {
      throw new CommTimeoutError(
        `${where}: ${me} timed out after ${call.timeoutMs} ms waiting for a message from any of group ` +
          `ranks ${peers.join(', ')}`,
      );
    }
    if (sleepMs === 1 && call.debug) monitor?.waiting(call.debug.record, 'a message from any group rank');
    await new Promise((resolve) => setTimeout(resolve, Math.min(sleepMs, remaining)));
    sleepMs = Math.min(2 * sleepMs, ANY_SOURCE_MAX_SLEEP_MS);
  }
}

/** Keeps a stream's pair of ranks in one number (group ranks stay far below it). */
const PAIR_STRIDE = 2 ** 24;

export class StreamCounters {
  /** Per tag, per pair of ranks: number keys, no text made per message; a cell per stream. */
  readonly #next = new Map<number, Map<number, { n: number }>>();
  /** The stream used last, kept at hand: a loop of calls uses one stream again and again. */
  #lastTag = -1;
  #lastPair = -1;
  #last = { n: 0 };

  /** The next message number of the stream from `src` to `dst` with `tag`. */
  take(src: number, dst: number, tag: number): number {
    return this.#cell(src, dst, tag).n++;
  }

  /** The number `take` would return, without taking it. */
  peek(src: number, dst: number, tag: number): number {
    return this.#cell(src, dst, tag).n;
  }

  #cell(src: number, dst: number, tag: number): { n: number } {
    const pair = src * PAIR_STRIDE + dst;
    if (tag === this.#lastTag && pair === this.#lastPair) return this.#last;
    let pairs = this.#next.get(tag);
    if (pairs === undefined) {
      pairs = new Map();
      this.#next.set(tag, pairs);
    }
    let cell = pairs.get(pair);
    if (cell === undefined) {
      cell = { n: 0 };
      pairs.set(pair, cell);
    }
    this.#lastTag = tag;
    this.#lastPair = pair;
    this.#last = cell;
    return cell;
  }
}
