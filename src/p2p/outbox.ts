/**
 * The sending end of one direction of a CollectiveGroup. Every part of a
 * message is issued synchronously, in call order, so ThreadGroup's per-stream
 * numbering keeps messages in order however many are in flight. The sender
 * must leave a message's tensors untouched until its Work completes (as with
 * torch's isend): receivers read them in place.
 *
 * With compression or network emulation configured, a message issues once
 * the previous one has issued all its parts. Without a tensor to compress it
 * goes whole at its emulated arrival time; with some, it goes as a stream of
 * parts (header, raw tensors, each compressed tensor chunk by chunk), each
 * charged to the link as soon as it is ready, so compression, the link and
 * the receiver's decompression overlap.
 *
 * In predict mode a message is a layer call (predict/layer-clock.ts): its
 * parts are issued at the message's own clock, and the program's wait on the
 * message's Work is what moves the rank's clock. An emulated link then sleeps
 * for nothing: it charges the message at its virtual time, and the arrival it
 * gives is the parts' predicted arrival.
 */
import { serialize } from 'node:v8';
import { type LayerCall, layerCall } from '../predict/layer-clock.ts';
import { Work } from '../runtime/work.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { ChunkedTensor, TensorCompressor } from './compression/tensor-compressor.ts';
import { explain } from './errors.ts';
import {
  DEFAULT_HEADER_LIMITS,
  encodeHeader,
  MessageKind,
  type TensorSpec,
  type WireCodec,
} from './header.ts';
import type { P2PServices, Schedule } from './services.ts';
import { splitValue } from './skeleton.ts';
import { type Link, loneTensorProblem } from './transport.ts';

/** Parts of one message (chunks, mostly) in the store at once, waiting for the receiver. */
const PARTS_IN_FLIGHT = 32;

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
      this.#checkSize(tensors, where);
      skeleton = serializeSkeleton(split.skeleton, where);
    } catch (error) {
      return Work.rejected(error); // nothing was issued: the channel stays usable
    }
    const message = { kind, seq: this.#seq++, skeleton, where, options };
    const layer = layerCall();
    if (!this.#services.compressor && !this.#services.netem) {
      const header = encodeMessageHeader(message, tensors, []);
      return layer.settle(
        this.#settle(
          layer.run(() => this.#issue(message, header, tensors)),
          where,
        ),
      );
    }
    const previous = this.#issued;
    let issued!: () => void;
    this.#issued = new Promise((resolve) => (issued = resolve));
    return layer.settle(new Work(this.#issueInTurn(message, tensors, previous, issued, schedule, layer)));
  }

  /**
   * A message over the limit would be refused by a receiver of the same config only after this end
   * had issued it, leaving this end to wait for its timeout: refused here at once instead.
   */
  #checkSize(tensors: readonly Tensor[], where: string): void {
    const limit = this.#services.maxMessageBytes ?? DEFAULT_HEADER_LIMITS.maxMessageBytes;
    const bytes = tensors.reduce((sum, t) => sum + t.nbytes, 0);
    if (bytes > limit) {
      throw new RangeError(
        `${where}: the message holds ${bytes} bytes of tensors, over the limit of ${limit} ` +
          '(cluster.collective.max_message_bytes); receivers refuse larger messages',
      );
    }
  }

  /**
   * Once the previous message issued: a message with no tensor to compress
   * goes whole, after its emulated wire time; one with compressed tensors goes
   * part by part (header, each raw tensor, each chunk), each part on the wire
   * as soon as it is ready, so compression, the link and the receiver overlap.
   * Predicting, an emulated link charges the message at its layer call's
   * virtual time, and its parts are issued at once, arriving when it says.
   */
  async #issueInTurn(
    message: Message,
    tensors: readonly Tensor[],
    previous: Promise<void>,
    issued: () => void,
    schedule: Schedule | undefined,
    layer: LayerCall,
  ): Promise<void> {
    const { compressor, netem } = this.#services;
    const virtualS = layer.issuedUs === undefined ? undefined : layer.issuedUs / 1e6;
    /** A part's predicted arrival (µs) where the link's arrival is virtual; undefined where it is waited for. */
    const predicted = (arrivalS: number | undefined) =>
      arrivalS === undefined || virtualS === undefined ? undefined : arrivalS * 1e6;
    let plans: Array<ChunkedTensor | undefined> = [];
    const works: Array<Work<void>> = [];
    let issuing: Promise<void> = Promise.resolve();
    try {
      await previous;
      if (this.#broken) throw this.#broken;
      plans = tensors.map((t) => (message.kind === MessageKind.message ? compressor?.plan(t) : undefined));
      const header = encodeMessageHeader(message, tensors, plans, compressor?.codec.name);
      if (plans.every((p) => p === undefined)) {
        let arrival: number | undefined;
        if (netem) {
          const wireBytes = header.length + tensors.reduce((sum, t) => sum + t.nbytes, 0);
          arrival = schedule?.(wireBytes) ?? netem.charge('send', [this.#peerName], wireBytes, virtualS)[0];
          if (virtualS === undefined) await netem.waitUntil(arrival);
          if (this.#broken) throw this.#broken;
        }
        works.push(...layer.run(() => this.#issue(message, header, tensors), predicted(arrival)));
      } else {
        // A part is charged the moment it is ready and issued at its arrival, after the part
        // before it: the link never idles waiting for a timer, and parts keep their order.
        const charge = netem?.begin('send', [this.#peerName], virtualS);
        const issuePart = (part: Tensor | Uint8Array) => {
          const arrival = charge?.(part instanceof Uint8Array ? part.length : part.nbytes)[0];
          issuing = issuing.then(async () => {
            if (arrival !== undefined && virtualS === undefined) await netem!.waitUntil(arrival);
            // A receiver slower than the codec holds the parts back, not the store's slots. A part
            // that failed is #settle's to report, with the rest: here it only stops holding back.
            const behind = works[works.length - PARTS_IN_FLIGHT];
            if (behind) await Promise.resolve(behind).catch(() => undefined);
            if (this.#broken) throw this.#broken;
            works.push(
              layer.run(
                () =>
                  part instanceof Uint8Array
                    ? this.#sendHeader(message, part)
                    : this.#sendData(message, part),
                predicted(arrival),
              ),
            );
          });
        };
        issuePart(header);
        for (const [i, tensor] of tensors.entries()) {
          const plan = plans[i];
          if (!plan) issuePart(tensor);
          else for await (const chunk of compressor!.chunks(plan)) issuePart(chunk);
        }
        await issuing;
      }
    } catch (error) {
      // Whatever stopped the issuing is `error` itself or followed from it: `error` is the one to report.
      await issuing.catch(() => undefined);
      // Parts already issued may still be read from the leased buffers: those go back once they settle.
      void Promise.allSettled(works).then(() => finishAll(compressor, plans));
      const explained = explain(error, message.where);
      this.#broken ??= explained;
      throw explained;
    } finally {
      issued();
    }
    try {
      await this.#settle(works, message.where);
    } finally {
      finishAll(compressor, plans);
    }
  }

  /** Issues the header and every tensor's send now, synchronously. */
  #issue(message: Message, header: Uint8Array, tensors: readonly Tensor[]): Array<Work<void>> {
    return [this.#sendHeader(message, header), ...tensors.map((t) => this.#sendData(message, t))];
  }

  #sendHeader(message: Message, header: Uint8Array): Work<void> {
    const { lead } = this.#link;
    return lead.group.sendObject(header, lead.peer, { tag: lead.tag, timeoutMs: message.options.timeoutMs });
  }

  #sendData(message: Message, wire: Tensor): Work<void> {
    const path = this.#link.dataPath(wire.device);
    return path.group.send(wire, path.peer, { tag: path.tag, timeoutMs: message.options.timeoutMs });
  }

  /** The tensor alone on its stream: no header, the receiver's buffer says what it is. */
  sendTensor(tensor: Tensor, where: string, options: TransferOptions = {}): Work<void> {
    where = `${where} to worker ${this.#link.peerLabel}`;
    const problem = loneTensorProblem(tensor, where, this.#broken);
    if (problem) return Work.rejected(problem);
    this.#seq++;
    const path = this.#link.loneStream(tensor.device);
    const layer = layerCall();
    const send = layer.run(() =>
      path.group.send(tensor, path.peer, { tag: path.tag, timeoutMs: options.timeoutMs }),
    );
    return layer.settle(this.#settle([send], where));
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

/** `plans[i]` set: tensor i travels in compressed chunks, under the compressor's codec. */
function encodeMessageHeader(
  message: Message,
  tensors: readonly Tensor[],
  plans: ReadonlyArray<ChunkedTensor | undefined>,
  codec?: WireCodec,
): Uint8Array {
  const specs = tensors.map((t, i): TensorSpec => {
    const spec: TensorSpec = { dtype: t.dtype, shape: [...t.shape], device: t.device };
    const plan = plans[i];
    if (plan) spec.chunkBytes = plan.chunkBytes;
    return spec;
  });
  const chunked = plans.some((p) => p !== undefined);
  return encodeHeader(message.kind, message.seq, specs, message.skeleton, chunked ? codec : undefined);
}

function finishAll(
  compressor: TensorCompressor | undefined,
  plans: ReadonlyArray<ChunkedTensor | undefined>,
): void {
  for (const plan of plans) if (plan) compressor!.finish(plan);
}

function serializeSkeleton(skeleton: unknown, where: string): Uint8Array {
  try {
    return serialize(skeleton);
  } catch (error) {
    throw new TypeError(`${where}: the value cannot be structured-cloned: ${(error as Error).message}`);
  }
}
