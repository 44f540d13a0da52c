/**
 * The sending end of one direction of a CollectiveGroup. Every part of a
 * message is issued synchronously, in call order, so ThreadGroup's per-stream
 * numbering keeps messages in order however many are in flight. The sender
 * must leave a message's tensors untouched until its Work completes (as with
 * torch's isend): receivers read them in place.
 */
import { serialize } from 'node:v8';
import { Work } from '../runtime/work.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { explain } from './errors.ts';
import { encodeHeader, type MessageKind } from './header.ts';
import { splitValue } from './skeleton.ts';
import { type Link, loneTensorProblem } from './transport.ts';

export interface TransferOptions {
  timeoutMs?: number;
}

export class Outbox {
  readonly #link: Link;
  #seq = 0;
  /** Set by the first failure: the streams are out of step after it, so later sends fail with it. */
  #broken: Error | undefined;

  constructor(link: Link) {
    this.#link = link;
  }

  /** A header (kind, seq, tensor specs, skeleton) on the lead stream, then each tensor on its device's stream. */
  send(value: unknown, kind: MessageKind, where: string, options: TransferOptions = {}): Work<void> {
    where = `${where} to worker ${this.#link.peerLabel}`;
    if (this.#broken) return Work.rejected(this.#broken);
    let header: Uint8Array;
    let parts: Array<{ tensor: Tensor; tag: number; group: Link['lead']['group'] }>;
    try {
      const { skeleton, tensors } = splitValue(value, where);
      parts = tensors.map((tensor) => ({ tensor, ...this.#link.dataPath(tensor.device, where) }));
      const specs = tensors.map((t) => ({ dtype: t.dtype, shape: [...t.shape], device: t.device }));
      header = encodeHeader(kind, this.#seq, specs, serializeSkeleton(skeleton, where));
    } catch (error) {
      return Work.rejected(error); // nothing was issued: the channel stays usable
    }
    this.#seq++;
    const { peer, lead } = this.#link;
    const opts = { tag: lead.tag, timeoutMs: options.timeoutMs };
    const works: Array<Work<void>> = [lead.group.sendObject(header, peer, opts)];
    for (const p of parts) works.push(p.group.send(p.tensor, peer, { ...opts, tag: p.tag }));
    return this.#settle(works, where);
  }

  /** The tensor alone on the lead stream: no header, the receiver's buffer says what it is. */
  sendTensor(tensor: Tensor, where: string, options: TransferOptions = {}): Work<void> {
    where = `${where} to worker ${this.#link.peerLabel}`;
    const problem = loneTensorProblem(this.#link, tensor, where, this.#broken);
    if (problem) return Work.rejected(problem);
    this.#seq++;
    const { peer, lead } = this.#link;
    return this.#settle(
      [lead.group.send(tensor, peer, { tag: lead.tag, timeoutMs: options.timeoutMs })],
      where,
    );
  }

  #settle(works: Array<Work<void>>, where: string): Work<void> {
    const all = works.length === 1 ? works[0] : new Work(Promise.all(works));
    return all.then(
      () => undefined,
      (error: unknown) => {
        const explained = explain(error, where);
        this.#broken ??= explained;
        throw explained;
      },
    );
  }
}

function serializeSkeleton(skeleton: unknown, where: string): Uint8Array {
  try {
    return serialize(skeleton);
  } catch (error) {
    throw new TypeError(`${where}: the value cannot be structured-cloned: ${(error as Error).message}`);
  }
}
