/**
 * What a call's local checks produce, kept for the next call of the same
 * shape: a hot loop repeats one call, and building its signature text (and
 * hashing the new string wherever it is looked up) cost more than the rest
 * of a small allReduce's checks together.
 */
import type { Tensor } from '../tensor/tensor.ts';

/**
 * The signature compared between ranks, the bytes the call moves (as
 * nccl-tests counts them) and, for point-to-point calls whose signature is
 * only `p2p`, what to show.
 */
export type Signed = { signature: string; bytes: number; label?: string };

/** Builds a call's Signed from its tensor's layout (e.g. `float32[4,8]`) and bytes, and its two details. */
export type MakeSigned = (
  layout: string,
  first: string | number,
  second: string | number,
  bytes: number,
) => Signed;

/**
 * The last call's Signed of one kind of call (an op, or an op's role),
 * returned again while the next call has a tensor of the same layout
 * (Tensor.describe(), made once per tensor, which fixes its bytes) and the
 * same two details (a reduce op, a root, a peer, a tag). Anything else makes
 * a new one. A group keeps one per kind in a field of its own: a map by kind
 * cost a hash lookup on every call.
 */
export class RecentSignature {
  #layout: string | undefined;
  #first: string | number = '';
  #second: string | number = '';
  #signed: Signed | undefined;

  signed(tensor: Tensor, first: string | number, second: string | number, make: MakeSigned): Signed {
    const layout = tensor.describe();
    if (
      this.#signed !== undefined &&
      this.#layout === layout &&
      this.#first === first &&
      this.#second === second
    ) {
      return this.#signed;
    }
    this.#layout = layout;
    this.#first = first;
    this.#second = second;
    this.#signed = make(layout, first, second, tensor.nbytes);
    return this.#signed;
  }
}
