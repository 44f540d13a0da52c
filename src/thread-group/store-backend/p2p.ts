/**
 * Point-to-point over a TensorStore. Each (sender, receiver, tag) stream has
 * its own message counter on both ends, so the n-th send matches the n-th
 * recv of that stream whatever else is in flight, and sends never wait for
 * unrelated receives (batchIsendIrecv cannot deadlock).
 */
import type { Tensor } from '../../tensor/tensor.ts';
import type { Exchange } from './exchange.ts';
import { copyElements } from './slices.ts';

export async function send(x: Exchange, tensor: Tensor): Promise<void> {
  await x.publish(0, tensor, 1);
  await x.consumed(0);
}

export async function recv(x: Exchange, tensor: Tensor, src: number): Promise<void> {
  const value = await x.get(0, src);
  x.expectLike(value, tensor, src);
  copyElements(tensor, 0, value);
  await x.finish(0, src);
}

export class StreamCounters {
  readonly #next = new Map<string, number>();

  /** The next message number of the stream from `src` to `dst` with `tag`. */
  take(src: number, dst: number, tag: number): number {
    const stream = `${src}>${dst}:${tag}`;
    const n = this.#next.get(stream) ?? 0;
    this.#next.set(stream, n + 1);
    return n;
  }
}
