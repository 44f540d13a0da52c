/**
 * Point-to-point messages between members of a group that are tasks of one
 * thread. A send copies its tensor and completes at once (the copy is the
 * receiver's to take, so the sender may reuse its buffer); a receive takes
 * the first message of its stream (sender, tag) that came, or waits for it.
 * Messages and receives are kept per receiver and tag in the order they came,
 * so each stream is first in, first out, and recvFromAny takes whichever
 * message was sent first.
 */
import type { AbortWord } from '../../runtime/abort-word.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CallInfo, GroupView } from '../backend.ts';
import { abandonedError, layoutMismatchError, ranksText } from '../store-backend/call-failure.ts';
import { watchMonitored } from '../store-backend/monitored-wait.ts';
import { copyElements } from '../store-backend/slices.ts';

/** A message as sent: the sender's copy, or why the sender's call failed its own checks. */
export interface Message {
  src: number;
  tensor?: Tensor;
  failure?: string;
}

interface Receive {
  /** The sender it takes from (group rank), or undefined for any. */
  src: number | undefined;
  take(message: Message): void;
}

/** What a receive does with its message: the receiving member's view, call and (for recv) tensor. */
export interface Receiver {
  group: GroupView;
  call: CallInfo;
  abort: AbortWord | undefined;
}

export class TaskMailboxes {
  /** By `dst:tag`: messages no receive has taken yet, in the order they were sent. */
  readonly #messages = new Map<string, Message[]>();
  /** By `dst:tag`: receives posted before their message came, in the order they were posted. */
  readonly #receives = new Map<string, Receive[]>();

  send(src: number, dst: number, tag: number, tensor: Tensor): void {
    this.#post(dst, tag, { src, tensor: tensor.clone() });
  }

  /** A send that failed its sender's checks: the matching receive fails naming it. */
  sendFailure(src: number, dst: number, tag: number, error: Error): void {
    this.#post(dst, tag, { src, failure: error.message.split('\n')[0] });
  }

  /** A receive that failed its own checks: the message meant for it is dropped, so the stream stays in step. */
  dropNext(src: number, dst: number, tag: number): void {
    const message = this.#take(dst, tag, src);
    if (message === undefined) this.#listOf(this.#receives, dst, tag).push({ src, take: () => {} });
  }

  /** Receives the message of stream (src, tag), or of any sender when `src` is undefined; resolves to it. */
  receive(receiver: Receiver, dst: number, tag: number, src: number | undefined): Promise<Message> {
    const ready = this.#take(dst, tag, src);
    if (ready) return Promise.resolve(ready);
    const { group, call, abort } = receiver;
    return new Promise<Message>((resolve, reject) => {
      let settled = false;
      const receives = this.#listOf(this.#receives, dst, tag);
      const receive: Receive = {
        src,
        take: (message) => {
          settled = true;
          stop();
          resolve(message);
        },
      };
      receives.push(receive);
      const stop = watchMonitored(
        {
          group,
          call,
          abort,
          deadline: performance.now() + call.timeoutMs,
          waitingFor: () => (src === undefined ? 'a message from any rank' : ranksText(group, [src])),
          waitedFor: src === undefined ? undefined : () => [src],
        },
        () => settled,
        (error) => {
          settled = true;
          receives.splice(receives.indexOf(receive), 1);
          reject(error);
        },
      );
    });
  }

  #post(dst: number, tag: number, message: Message): void {
    const receives = this.#receives.get(`${dst}:${tag}`);
    const i = receives?.findIndex((r) => r.src === undefined || r.src === message.src) ?? -1;
    if (i >= 0) receives!.splice(i, 1)[0].take(message);
    else this.#listOf(this.#messages, dst, tag).push(message);
  }

  #take(dst: number, tag: number, src: number | undefined): Message | undefined {
    const messages = this.#messages.get(`${dst}:${tag}`);
    const i = messages?.findIndex((m) => src === undefined || m.src === src) ?? -1;
    return i >= 0 ? messages!.splice(i, 1)[0] : undefined;
  }

  #listOf<T>(lists: Map<string, T[]>, dst: number, tag: number): T[] {
    const key = `${dst}:${tag}`;
    let list = lists.get(key);
    if (!list) lists.set(key, (list = []));
    return list;
  }
}

/** The message's tensor for `receiver`: its sender's failure, or a layout other than `like`'s, fails the receive. */
export function messageTensor(receiver: Receiver, message: Message, like?: Tensor): Tensor {
  const { group, call } = receiver;
  if (message.failure !== undefined) throw abandonedError(group, call, message.src, message.failure);
  const tensor = message.tensor as Tensor;
  if (like && like.describe() !== tensor.describe()) {
    throw layoutMismatchError(group, call, like.describe(), message.src, tensor.describe());
  }
  return tensor;
}

/** Receives `message` into `tensor`; resolves to its sender's group rank. */
export function land(receiver: Receiver, message: Message, tensor: Tensor): number {
  copyElements(tensor, 0, messageTensor(receiver, message, tensor));
  return message.src;
}
