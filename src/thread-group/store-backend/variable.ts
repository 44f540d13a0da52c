/**
 * Calls whose sizes only the producer knows (object messages) and barrier.
 * Consumers copy the value out, so what they return is theirs to keep.
 */
import type { Tensor } from '../../tensor/tensor.ts';
import { type Exchange, FINGERPRINT } from './exchange.ts';

export async function takeCopy(
  x: Exchange,
  phase: number,
  producer: number,
  consumer?: number,
): Promise<Tensor> {
  const value = (await x.get(phase, producer, consumer)).clone();
  await x.finish(phase, producer, consumer);
  return value;
}

export async function broadcastAny(x: Exchange, tensor: Tensor | undefined, src: number): Promise<Tensor> {
  if (x.rank !== src) return takeCopy(x, 0, src);
  if (x.size > 1) {
    await x.publish(0, tensor!, x.peers());
    await x.consumed(0);
  }
  return tensor!;
}

/** broadcastAny with the fingerprint check folded in, as broadcastCompared does. */
export async function broadcastAnyCompared(
  x: Exchange,
  tensor: Tensor | undefined,
  src: number,
): Promise<Tensor> {
  if (x.rank === src && x.size === 1) return tensor!;
  let value = tensor;
  await x.readAll(0, x.rank === src ? tensor! : FINGERPRINT, (p, v) => {
    if (p === src) value = v.clone();
  });
  return value!;
}

export async function allGatherAny(x: Exchange, tensor: Tensor): Promise<Tensor[]> {
  await x.publish(0, tensor, x.peers());
  const values: Tensor[] = [];
  for (let p = 0; p < x.size; p++) values.push(p === x.rank ? tensor : await takeCopy(x, 0, p));
  await x.consumed(0);
  return values;
}

/** Every rank's value on `dst`, in group-rank order (its own as given); undefined on the others. */
export async function gatherAny(x: Exchange, tensor: Tensor, dst: number): Promise<Tensor[] | undefined> {
  if (x.rank !== dst) {
    await x.publish(0, tensor, [dst]);
    await x.consumed(0);
    return undefined;
  }
  const values: Tensor[] = [];
  for (let p = 0; p < x.size; p++) values.push(p === x.rank ? tensor : await takeCopy(x, 0, p));
  return values;
}

/** `tensors[p]` to rank p (`tensors` given on `src` only); resolves to this rank's value. */
export async function scatterAny(
  x: Exchange,
  tensors: readonly Tensor[] | undefined,
  src: number,
): Promise<Tensor> {
  if (x.rank !== src) return takeCopy(x, 0, src, x.rank);
  const list = tensors!;
  for (const p of x.peers()) await x.publish(0, list[p], [p], p);
  for (const p of x.peers()) await x.consumed(0, p);
  return list[x.rank];
}
