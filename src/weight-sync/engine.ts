/**
 * WeightSyncEngine: moves a trainer's weights (a stream of named tensors of
 * mixed dtypes) from sender ranks to receiver ranks of one group, packed into
 * buckets, bit-exact and in stream order. See docs/guides/weight-sync.md.
 *
 *   const engine = new WeightSyncEngine(group, { senders: [0, 1], receivers: [2, 3], bucketBytes: 64 << 20 });
 *   await engine.send(model.namedParameters());                  // on every sender, the same stream
 *   for await (const [name, t] of engine.receive()) load(name, t); // on every receiver
 *
 * One sync at a time per engine. After a failed sync the ranks' message
 * streams may be out of step, so the engine refuses further syncs.
 *
 * In predict mode a sync is one layer call (predict/layer-clock.ts): every
 * call the engine makes during it is the sync's, issued at the sync's own
 * clock, so the engine's waits in the background of the program do not move
 * the rank's clock; the program's wait on send() does, and a receive's end.
 */
import { callsIn, type LayerCall, layerCall, UNTIMED } from '../predict/layer-clock.ts';
import { internalCalls } from '../runtime/work.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import type { WeightSyncStats } from './delta.ts';
import { WeightSyncError } from './errors.ts';
import { checkLoadInto, type LoadInto } from './into.ts';
import { resolveOptions, type WeightSyncConfig, type WeightSyncOptions } from './options.ts';
import type { WeightStream } from './plan.ts';
import { messageOf } from './protocol.ts';
import { BucketReceiver } from './receiver.ts';
import { BucketSender } from './sender.ts';

export interface ReceiveOptions {
  /**
   * Yield views instead of tensors the caller keeps: where the group can lend
   * it (ranks as threads or processes), a view on the sender's own bucket,
   * with no copy on the receiving side; elsewhere on one of the receiver's two
   * reused bucket buffers. A borrowed tensor is valid until the iterator moves
   * past its bucket (the sender then refills it); copy what must outlive
   * that, e.g. with `param.copy_(t)`. Tensors split across buckets are always
   * yielded as the caller's own. Without `borrow`, the tensors of one bucket
   * share one allocation of their own, freed once all are dropped.
   */
  borrow?: boolean;
  /**
   * Loads the sync straight into the caller's tensors (e.g. the model's
   * parameters): per tensor name, the contiguous host tensor of the same
   * dtype and shape to write it into, as a Map or a function. Each such
   * tensor is yielded as that target, already holding the value, and costs
   * the receiver one copy (`borrow` + `copy_` costs two where a relay hands
   * the bucket on). A name `into` does not give (undefined) is yielded as
   * without `into` (a view with `borrow`, else a tensor of the caller's own).
   * A target of another dtype or shape, or not a contiguous host tensor,
   * fails the sync on every rank with a WeightSyncError naming the tensor and
   * both, before any byte of its bucket is written. Targets must not be
   * changed during the receive.
   */
  into?: LoadInto;
}

export class WeightSyncEngine {
  readonly #group: ThreadGroup;
  readonly #config: WeightSyncConfig;
  readonly #sender: BucketSender | undefined;
  readonly #receiver: BucketReceiver | undefined;
  /** The running sync's layer call (predict mode). */
  #layer: LayerCall = UNTIMED;
  #busy = false;
  #broken: string | undefined;
  #lastSend: WeightSyncStats | undefined;

  constructor(group: ThreadGroup, options: WeightSyncOptions) {
    this.#config = resolveOptions(group, options);
    // The engine sees its own calls through (some rightly outlive send()); its send() and receive() are the user's.
    group = internalCalls(group);
    this.#group = group;
    const layer = () => this.#layer;
    const isSender = this.#config.senders.includes(group.rank);
    this.#sender = isSender ? new BucketSender(group, this.#config, layer) : undefined;
    this.#receiver = isSender ? undefined : new BucketReceiver(callsIn(group, layer), this.#config);
  }

  get role(): 'sender' | 'receiver' {
    return this.#sender ? 'sender' : 'receiver';
  }

  /**
   * What this rank's last completed sync moved: on a receiver the whole
   * stream, on a sender the buckets it sends; with `delta`, how many of them
   * were skipped as unchanged. Undefined before the first sync completes.
   */
  get lastSync(): WeightSyncStats | undefined {
    return this.#sender ? this.#lastSend : this.#receiver?.lastSync;
  }

  /**
   * On every sender: sends the stream (packed, or lent as views between
   * threads); resolves once every receiver has confirmed it, to what this
   * sender moved (`lastSync`). The stream's tensors must not change until then.
   */
  send(weights: WeightStream): Promise<WeightSyncStats> {
    const layer = layerCall();
    return layer.settle(this.#send(weights, layer));
  }

  async #send(weights: WeightStream, layer: LayerCall): Promise<WeightSyncStats> {
    const where = 'WeightSyncEngine.send';
    if (!this.#sender) throw this.#wrongRole(where, 'sender');
    this.#begin(where, layer);
    try {
      this.#lastSend = await this.#sender.send(weights, where);
      return this.#lastSend;
    } catch (error) {
      this.#broken = messageOf(error);
      throw error;
    } finally {
      this.#busy = false;
    }
  }

  /**
   * On every receiver: the stream's tensors, in order. Each yielded tensor is the caller's (unless `borrow`), or
   * with `into` the caller's target, loaded.
   */
  async *receive(options: ReceiveOptions = {}): AsyncGenerator<[string, Tensor]> {
    const where = 'WeightSyncEngine.receive';
    if (!this.#receiver) throw this.#wrongRole(where, 'receiver');
    if (
      typeof options !== 'object' ||
      options === null ||
      !['undefined', 'boolean'].includes(typeof options.borrow)
    ) {
      throw new TypeError(`${where}: options must be { borrow?: boolean, into?: Map | function }`);
    }
    const into = checkLoadInto(options.into, where);
    const layer = layerCall();
    this.#begin(where, layer);
    try {
      yield* this.#receiver.receive(options.borrow ?? false, into, where);
      // The program's loop waits for the receive's end here: the rank's clock catches up with it (what the
      // loop computed between tensors overlapped the receive).
      await layer.settle(Promise.resolve());
    } catch (error) {
      this.#broken = messageOf(error);
      throw error;
    } finally {
      this.#busy = false;
    }
  }

  #begin(where: string, layer: LayerCall): void {
    if (this.#broken !== undefined) {
      throw new WeightSyncError(
        `${where}: an earlier sync failed (${this.#broken}); create a new engine with another tag to sync again`,
      );
    }
    if (this.#busy) throw new WeightSyncError(`${where}: a sync is already running on this engine`);
    this.#busy = true;
    this.#layer = layer;
  }

  #wrongRole(where: string, role: string): Error {
    const { senders, receivers } = this.#config;
    return new WeightSyncError(
      `${where}: group rank ${this.#group.rank} is not a ${role} (senders: ${senders.join(', ')}; receivers: ${receivers.join(', ')})`,
    );
  }
}
