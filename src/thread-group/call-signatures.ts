/**
 * What ThreadGroup's calls sign with (recent-signatures.ts): the signatures
 * ranks compare, e.g. `allReduce(float32[4,8], sum)`, and the labels that
 * point-to-point calls, whose signature is only `p2p`, show in reports.
 */
import type { Tensor } from '../tensor/tensor.ts';
import { shortForm } from './group-id.ts';
import type { MakeSigned, Signed } from './recent-signatures.ts';

export const BARRIER_SIGNED: Signed = { signature: 'barrier()', bytes: 0 };

export const allReduceSigned: MakeSigned = (layout, op, _, bytes) => ({
  signature: `allReduce(${layout}, ${op})`,
  bytes,
});

export const broadcastSigned: MakeSigned = (layout, src, _, bytes) => ({
  signature: `broadcast(${layout}, src=${src})`,
  bytes,
});

export const reduceSigned: MakeSigned = (layout, dst, op, bytes) => ({
  signature: `reduce(${layout}, dst=${dst}, ${op})`,
  bytes,
});

const p2pSigned =
  (kind: 'send' | 'recv', role: 'src' | 'dst'): MakeSigned =>
  (layout, peer, tag, bytes) => ({
    signature: 'p2p',
    bytes,
    label: `${kind}(${layout}, ${role}=${peer}${tagText(tag as number)})`,
  });
export const sendSigned = p2pSigned('send', 'dst');
export const recvSigned = p2pSigned('recv', 'src');

/**
 * What every rank of a reduceScatter agrees on: its inputs' dtype and shapes,
 * each rank's output's. Even ones read as before (`float32[4]`); uneven ones
 * list every shape (`float32[[0],[1],[2]]`), hashed when the list is long
 * (signatures travel as store tags, which are bounded).
 */
export function sharesOf(inputs: readonly Tensor[]): string {
  const first = inputs[0].describe();
  if (inputs.every((t) => t.describe() === first)) return first;
  return `${inputs[0].dtype}[${shortForm(inputs.map((t) => `[${t.shape.join(',')}]`).join(','), 96)}]`;
}

/**
 * Tags the layers above reserve for their own messages (weight sync from
 * 0x77530000, p2p from 2^40) say nothing to someone reading a report, so a
 * call's label shows only tags below this: the ones a user passes.
 */
const SHOWN_TAGS_BELOW = 2 ** 24;

/** `, tag=N` in a point-to-point call's label, for a tag a user passed. */
export function tagText(tag: number): string {
  return tag < SHOWN_TAGS_BELOW ? `, tag=${tag}` : '';
}
