/**
 * The receiving end of one direction of a CollectiveGroup. Lead-stream
 * receives are issued at call time (so they match messages in call order);
 * a message's data receives can only be issued once its header arrived, and
 * must be issued in message order to take the right numbers on the data
 * streams, so each message waits for the previous one to have issued its own
 * (not to have finished: transfers still overlap). A compressed tensor
 * arrives in chunks, each borrowed from the sender (no copy of the wire
 * bytes) and restored into its place in the destination as soon as it lands.
 * In predict mode a receive is a layer call (predict/layer-clock.ts): its
 * parts are posted at the receive's own clock (the data once the header is
 * in), and the program's wait on the receive's Work moves the rank's clock.
 */
import { deserialize } from 'node:v8';
import { type LayerCall, layerCall } from '../predict/layer-clock.ts';
import { Work } from '../runtime/work.ts';
import { Tensor } from '../tensor/tensor.ts';
import { explain, P2PHeaderError, P2PProtocolError } from './errors.ts';
import {
  chunkCount,
  DEFAULT_HEADER_LIMITS,
  decodeHeader,
  HEADER_MAGIC,
  type Header,
  MessageKind,
} from './header.ts';
import type { TransferOptions } from './outbox.ts';
import { DEFAULT_CODEC_WAIT_MS, type P2PServices } from './services.ts';
import { fillSkeleton } from './skeleton.ts';
import { type Link, loneTensorProblem } from './transport.ts';

const KIND_NAMES = { [MessageKind.message]: 'send()', [MessageKind.broadcast]: 'broadcast()' };
const PAIRING_HINT = 'the peer probably called sendTensor; pair it with recvTensor';

export class Inbox {
  readonly #link: Link;
  readonly #services: P2PServices;
  #seq = 0;
  /** Resolves once the previous message issued its data receives (never rejects). */
  #issued: Promise<void> = Promise.resolve();
  #broken: Error | undefined;

  constructor(link: Link, services: P2PServices = {}) {
    this.#link = link;
    this.#services = services;
  }

  recv(kind: MessageKind, where: string, options: TransferOptions = {}): Work<unknown> {
    where = `${where} from worker ${this.#link.peerLabel}`;
    if (this.#broken) return Work.rejected(this.#broken);
    const { lead } = this.#link;
    const seq = this.#seq++;
    const layer = layerCall();
    const header = layer.run(() =>
      lead.group.recvObject(lead.peer, { tag: lead.tag, timeoutMs: options.timeoutMs }),
    );
    const previous = this.#issued;
    let release!: () => void;
    this.#issued = new Promise((resolve) => (release = resolve));
    return layer.settle(
      new Work(this.#receive(header, previous, release, { seq, kind, where, options }, layer)),
    );
  }

  async #receive(
    lead: Work<unknown>,
    previous: Promise<void>,
    release: () => void,
    call: { seq: number; kind: MessageKind; where: string; options: TransferOptions },
    layer: LayerCall,
  ): Promise<unknown> {
    let header: Header;
    let tensors: Tensor[];
    const transfers: Array<PromiseLike<unknown>> = [];
    try {
      header = this.#check(await leadBytes(lead, call.where), call);
      await previous;
      if (this.#broken) throw this.#broken;
      tensors = this.#allocate(header, call.where);
      // Every part's receive now, in the order the sender issues the parts.
      layer.run(() =>
        header.tensors.forEach((spec, i) => {
          const path = this.#link.dataPath(tensors[i].device);
          const options = { tag: path.tag, timeoutMs: call.options.timeoutMs };
          const { chunkBytes } = spec;
          if (chunkBytes === undefined) {
            transfers.push(path.group.recv(tensors[i], path.peer, options));
            return;
          }
          for (let k = 0; k < chunkCount(tensors[i].nbytes, chunkBytes); k++) {
            transfers.push(
              path.group.recvAnyBorrowed(path.peer, options).then(async (chunk) => {
                try {
                  await this.#services.compressor!.restoreChunk(
                    tensors[i],
                    chunkBytes,
                    k,
                    chunk.tensor,
                    call.options.timeoutMs ?? DEFAULT_CODEC_WAIT_MS,
                    call.where,
                  );
                } finally {
                  await chunk.release();
                }
              }),
            );
          }
        }),
      );
    } catch (error) {
      throw this.#break(error, call.where);
    } finally {
      release();
    }
    try {
      await Promise.all(transfers);
      return fillSkeleton(header.skeleton, tensors);
    } catch (error) {
      throw this.#break(error, call.where);
    }
  }

  /** Where the message's tensors land; the header's sizes were checked against the limits already. */
  #allocate(header: Header, where: string): Tensor[] {
    return header.tensors.map((s, i) => {
      try {
        return Tensor.empty(s.shape, s.dtype, { device: this.#link.landing(s.device) });
      } catch (error) {
        // Within the limits but more than this worker can hold now: the sender's message, not this worker, is at fault.
        throw new P2PHeaderError(
          `${where}: the header declares tensor ${i} as ${s.dtype}[${s.shape.join(',')}], which cannot be allocated here: ${(error as Error).message}`,
          { cause: error },
        );
      }
    });
  }

  #check(bytes: Uint8Array, call: { seq: number; kind: MessageKind; where: string }): Header {
    let header: Header;
    const { maxMessageBytes = DEFAULT_HEADER_LIMITS.maxMessageBytes } = this.#services;
    try {
      header = decodeHeader(bytes, { ...DEFAULT_HEADER_LIMITS, maxMessageBytes });
    } catch (error) {
      throw new P2PHeaderError(`${call.where}: ${(error as Error).message}`);
    }
    if (header.kind !== call.kind) {
      throw new P2PProtocolError(
        `${call.where}: expected a message sent with ${KIND_NAMES[call.kind]}, but the peer used ${KIND_NAMES[header.kind]}`,
      );
    }
    const compressed = header.tensors.some((t) => t.chunkBytes !== undefined);
    const mine = this.#services.compressor?.codec.name;
    if (compressed && header.codec !== mine) {
      throw new P2PHeaderError(
        `${call.where}: the peer compressed tensors with ${header.codec}, but this worker's config ${mine ? `uses ${mine}` : 'has no tensor compression'}`,
      );
    }
    if (header.seq !== call.seq >>> 0) {
      throw new P2PProtocolError(
        `${call.where}: message #${call.seq} arrived numbered #${header.seq}; the two ends are out of step`,
      );
    }
    return header;
  }

  recvTensor(tensor: Tensor, where: string, options: TransferOptions = {}): Work<Tensor> {
    where = `${where} from worker ${this.#link.peerLabel}`;
    const problem = loneTensorProblem(tensor, where, this.#broken);
    if (problem) return Work.rejected(problem);
    this.#seq++;
    const path = this.#link.loneStream(tensor.device);
    const layer = layerCall();
    const received = layer.run(() =>
      path.group.recv(tensor, path.peer, { tag: path.tag, timeoutMs: options.timeoutMs }),
    );
    return layer.settle(
      received.then(
        (t) => {
          // A header that happens to fit a uint8 buffer passes the shape check; its content gives it away.
          if (t.device === 'cpu' && t.dtype === 'uint8' && isEnvelopedHeader(t.bytes())) {
            throw this.#break(
              new P2PProtocolError(
                `${where}: the peer sent this message with send(); pair it with recv(), not recvTensor`,
              ),
              where,
            );
          }
          return t;
        },
        (error: unknown) => {
          throw this.#break(error, where);
        },
      ),
    );
  }

  #break(error: unknown, where: string): Error {
    const explained = explain(error, where);
    this.#broken ??= explained;
    return explained;
  }
}

/** The header bytes of a lead-stream message; anything else means the peer did not call send(). */
async function leadBytes(lead: Work<unknown>, where: string): Promise<Uint8Array> {
  let value: unknown;
  try {
    value = await lead;
  } catch (error) {
    // Only v8 failing on what arrived means a raw tensor came instead of a header.
    if (!(error instanceof Error) || !/deserializ/i.test(error.message)) throw error;
    throw new P2PProtocolError(`${where}: the message is not a send() header (${PAIRING_HINT})`, {
      cause: error,
    });
  }
  if (!(value instanceof Uint8Array)) {
    throw new P2PProtocolError(`${where}: the message is not a send() header (${PAIRING_HINT})`);
  }
  return value;
}

/** True when `bytes` is a header as sendObject carries it (a v8-serialized Uint8Array starting with the magic). */
function isEnvelopedHeader(bytes: Uint8Array): boolean {
  if (bytes[0] !== 0xff) return false; // v8's version tag: cheap rejection of ordinary data
  try {
    const inner = deserialize(bytes);
    return (
      inner instanceof Uint8Array &&
      inner.length >= 4 &&
      new DataView(inner.buffer, inner.byteOffset).getUint32(0, true) === HEADER_MAGIC
    );
  } catch {
    return false;
  }
}
