/**
 * The sending end of one direction of a CollectiveGroup. Every part of a
 * message is issued synchronously, in call order, so ThreadGroup's per-stream
 * numbering keeps messages in order however many are in flight. The sender
 * must leave a message's tensors untouched until its Work completes (as with
 * torch's isend): receivers read them in place.
 *
 * With compression or network emulation configured, a message first
 * compresses its tensors and waits for its emulated arrival time; messages
 * still issue in call order, each after the previous one issued.
 */
import { serialize } from 'node:v8';
import { Work } from '../runtime/work.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { EncodedTensor } from './compression/tensor-compressor.ts';
import { explain } from './errors.ts';
import { encodeHeader, MessageKind, type TensorSpec } from './header.ts';
import type { P2PServices, Schedule } from './services.ts';
import { splitValue } from './skeleton.ts';
import { type Link, loneTensorProblem } from './transport.ts';

export interface TransferOptions {
  timeoutMs?: number;
}

export class Outbox {
  readonly #link: Link;
  /** The receiving worker's name. */
  readonly #peerName: string;
  readonly #services: P2PServices;
  #seq = 0;
  /** Resolves once the previous message issued (never rejects); used when messages wait before issuing. */
  #issued: Promise<void> = Promise.resolve();
  /** Set by the first failure: the streams are out of step after it, so later sends fail with it. */
  #broken: Error | undefined;

  constructor(link: Link, peerName: string, services: P2PServices = {}) {
    this.#link = link;
    this.#peerName = peerName;
    this.#services = services;
  }

  /**
   * A header (kind, seq, tensor specs, skeleton) on the lead stream, then each
   * tensor on its device's stream. `schedule` replaces the per-send network
   * charge (a broadcast charges all its receivers once).
   */
  send(
    value: unknown,
    kind: MessageKind,
    where: string,
    options: TransferOptions = {},
    schedule?: Schedule,
  ): Work<void> {
    where = `${where} to worker ${this.#link.peerLabel}`;
    if (this.#broken) return Work.rejected(this.#broken);
    let tensors: Tensor[];
    let skeleton: Uint8Array;
    try {
      const split = splitValue(value, where);
      tensors = split.tensors;
      skeleton = serializeSkeleton(split.skeleton, where);
    } catch (error) {
      return Work.rejected(error); // nothing was issued: the channel stays usable
    }
    const message = { kind, seq: this.#seq++, skeleton, where, options };
    const { compressor, netem } = this.#services;
    if (!compressor && !netem) {
      return this.#settle(
        this.#issue(
          message,
          tensors.map((wire) => ({ wire })),
        ),
        where,
      );
    }
    const encoding =
      compressor && kind === MessageKind.message
        ? compressor.encode(tensors)
        : Promise.resolve(tensors.map((wire): EncodedTensor => ({ wire })));
    const previous = this.#issued;
    let issued!: () => void;
    this.#issued = new Promise((resolve) => (issued = resolve));
    return new Work(this.#issueInTurn(message, tensors, encoding, previous, issued, schedule));
  }

  async #issueInTurn(
    message: Message,
    tensors: readonly Tensor[],
    encoding: Promise<EncodedTensor[]>,
    previous: Promise<void>,
    issued: () => void,
    schedule: Schedule | undefined,
  ): Promise<void> {
    let encoded: EncodedTensor[] = [];
    let works: Array<Work<void>>;
    try {
      encoded = await encoding;
      await previous;
      if (this.#broken) throw this.#broken;
      const netem = this.#services.netem;
      if (netem) {
        const wireBytes = encodeMessageHeader(message, tensors, encoded).length + sumWireBytes(encoded);
        await netem.waitUntil(schedule?.(wireBytes) ?? netem.charge('send', [this.#peerName], wireBytes)[0]);
        if (this.#broken) throw this.#broken;
      }
      works = this.#issue(message, encoded, tensors);
    } catch (error) {
      releaseAll(encoded);
      const explained = explain(error, message.where);
      this.#broken ??= explained;
      throw explained;
    } finally {
      issued();
    }
    try {
      await this.#settle(works, message.where);
    } finally {
      releaseAll(encoded);
    }
  }

  /** Issues the header and every tensor's send now, synchronously. */
  #issue(
    message: Message,
    encoded: readonly EncodedTensor[],
    tensors: readonly Tensor[] = encoded.map((e) => e.wire),
  ): Array<Work<void>> {
    const header = encodeMessageHeader(message, tensors, encoded);
    const { lead } = this.#link;
    const opts = { tag: lead.tag, timeoutMs: message.options.timeoutMs };
    const works: Array<Work<void>> = [lead.group.sendObject(header, lead.peer, opts)];
    for (const { wire } of encoded) {
      const path = this.#link.dataPath(wire.device);
      works.push(path.group.send(wire, path.peer, { ...opts, tag: path.tag }));
    }
    return works;
  }

  /** The tensor alone on its stream: no header, the receiver's buffer says what it is. */
  sendTensor(tensor: Tensor, where: string, options: TransferOptions = {}): Work<void> {
    where = `${where} to worker ${this.#link.peerLabel}`;
    const problem = loneTensorProblem(tensor, where, this.#broken);
    if (problem) return Work.rejected(problem);
    this.#seq++;
    const path = this.#link.loneStream(tensor.device);
    return this.#settle(
      [path.group.send(tensor, path.peer, { tag: path.tag, timeoutMs: options.timeoutMs })],
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

interface Message {
  kind: MessageKind;
  seq: number;
  skeleton: Uint8Array;
  where: string;
  options: TransferOptions;
}

function encodeMessageHeader(
  message: Message,
  tensors: readonly Tensor[],
  encoded: readonly EncodedTensor[],
): Uint8Array {
  const specs = tensors.map((t, i): TensorSpec => {
    const spec: TensorSpec = { dtype: t.dtype, shape: [...t.shape], device: t.device };
    if (encoded[i].compressedBytes !== undefined) spec.compressedBytes = encoded[i].compressedBytes;
    return spec;
  });
  const codec = encoded.find((e) => e.codec !== undefined)?.codec;
  return encodeHeader(message.kind, message.seq, specs, message.skeleton, codec);
}

function sumWireBytes(encoded: readonly EncodedTensor[]): number {
  return encoded.reduce((sum, e) => sum + e.wire.nbytes, 0);
}

function releaseAll(encoded: readonly EncodedTensor[]): void {
  for (const e of encoded) e.lease?.release();
}

function serializeSkeleton(skeleton: unknown, where: string): Uint8Array {
  try {
    return serialize(skeleton);
  } catch (error) {
    throw new TypeError(`${where}: the value cannot be structured-cloned: ${(error as Error).message}`);
  }
}
