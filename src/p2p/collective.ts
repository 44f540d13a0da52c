/**
 * Collective: one per worker (`ctx.collective`), the entry to p2p messaging
 * between named workers. It resolves worker names to ranks and caches one
 * CollectiveGroup per group name; groups are lazy, so nothing is allocated or
 * exchanged until their first call.
 *
 * Wiring: this module registers `collective` as a RankContext extension
 * (context/rank-context.ts builds it on first access and closes it with
 * the context) and augments the RankContext type, so the lower layer never
 * imports p2p.
 *
 * The job's ClusterConfig (ctx.config) is loaded when the Collective is
 * built: compression and network emulation are shared by all its groups, and
 * a codec that fails its probe fails createCollectiveGroup, before any message.
 */

import { extendRankContext, type RankContext } from '../context/rank-context.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import { InvalidStateError } from '../runtime/errors.ts';
import { internalCalls } from '../runtime/work.ts';
import type { Device } from '../tensor/dtype.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import { CollectiveGroup } from './collective-group.ts';
import type { CompressionStats } from './compression/tensor-compressor.ts';
import { loadP2PServices } from './load-config.ts';
import type { NetReport } from './netem/net-emulator.ts';
import type { P2PServices } from './services.ts';
import { tagBlockOf } from './transport.ts';

/** What a Collective needs of its rank: its name, every worker's name by global rank, and cached groups. */
export interface CollectiveHost {
  name: string;
  names: readonly string[];
  /** This worker's device: GPU tensors it receives land there. */
  device: Device;
  manager: {
    getGroup(ranks: readonly number[]): ThreadGroup;
    getDirectionGroup(from: number, to: number): ThreadGroup;
  };
  /** The job's validated cluster config, if any. */
  config?: ClusterConfig;
}

export class Collective {
  readonly #host: CollectiveHost;
  readonly #groups = new Map<string, CollectiveGroup>();
  /** Tag block → group name, to catch two names whose blocks collide before their streams mix. */
  readonly #blocks = new Map<number, string>();
  readonly #services: P2PServices;
  readonly #ready: Promise<void>;
  #closed = false;

  constructor(host: CollectiveHost) {
    this.#host = host;
    const { services, ready } = loadP2PServices(host.config, host.name, host.names);
    this.#services = services;
    this.#ready = ready;
    // Reported by createCollectiveGroup; a worker that never creates a group never needed it.
    ready.catch(() => {});
  }

  /** This worker's compression counters; undefined without tensor compression. */
  compressionStats(): CompressionStats | undefined {
    return this.#services.compressor?.stats();
  }

  /** This worker's emulated traffic and its predicted transfer time; undefined without net_emulation. */
  networkReport(): NetReport | undefined {
    return this.#services.netem?.report();
  }

  /** This worker's name. */
  get workerName(): string {
    return this.#host.name;
  }

  /**
   * The group of these workers (any order), created on first request and
   * cached; the default name is derived from the sorted names, so every
   * member gets the same group without talking.
   */
  async createCollectiveGroup(workerNames: readonly string[], groupName?: string): Promise<CollectiveGroup> {
    const where = 'createCollectiveGroup';
    if (this.#closed)
      throw new InvalidStateError(`${where}: the collective of worker "${this.workerName}" was closed`);
    await this.#ready;
    const workers = this.#checkWorkers(workerNames, where);
    if (groupName !== undefined && (typeof groupName !== 'string' || groupName.length === 0)) {
      throw new TypeError(`${where}: groupName must be a non-empty string, got ${String(groupName)}`);
    }
    const name = groupName ?? `p2p[${workers.join(',')}]`;
    const cached = this.#groups.get(name);
    if (cached) {
      if (cached.workers.join('\u0000') !== workers.join('\u0000')) {
        throw new InvalidStateError(
          `${where}: group "${name}" already exists with workers ${cached.workers.join(', ')}, not ${workers.join(', ')}`,
        );
      }
      return cached;
    }
    const tagBlock = tagBlockOf(name);
    const clash = this.#blocks.get(tagBlock);
    if (clash !== undefined) {
      throw new InvalidStateError(
        `${where}: group names "${name}" and "${clash}" map to the same streams; rename one`,
      );
    }
    const ranks = workers.map((w) => this.#host.names.indexOf(w));
    let threadGroup: ThreadGroup | undefined;
    const group = new CollectiveGroup({
      name,
      workers,
      ranks,
      self: this.workerName,
      tagBlock,
      // The p2p layer sees its own calls through (a send may outlive the user's Work); its Works are the user's.
      threadGroup: () => (threadGroup ??= internalCalls(this.#host.manager.getGroup(ranks))),
      directionGroup: (from, to) => internalCalls(this.#host.manager.getDirectionGroup(from, to)),
      device: this.#host.device,
      services: this.#services,
    });
    this.#blocks.set(tagBlock, name);
    this.#groups.set(name, group);
    return group;
  }

  #checkWorkers(workerNames: readonly string[], where: string): string[] {
    if (!Array.isArray(workerNames) || workerNames.length < 2) {
      throw new TypeError(`${where}: workerNames must be an array of at least two worker names`);
    }
    const known = this.#host.names;
    for (const w of workerNames) {
      if (typeof w !== 'string' || !known.includes(w)) {
        throw new RangeError(
          `${where}: unknown worker ${JSON.stringify(w)}; known workers: ${known.join(', ')}`,
        );
      }
      if (known.indexOf(w) !== known.lastIndexOf(w)) {
        throw new RangeError(`${where}: worker name "${w}" is given to several ranks; names must be unique`);
      }
    }
    const workers = [...new Set(workerNames)].sort();
    if (workers.length !== workerNames.length) {
      throw new RangeError(`${where}: worker names repeat in [${workerNames.join(', ')}]`);
    }
    if (!workers.includes(this.workerName)) {
      throw new RangeError(
        `${where}: this worker ("${this.workerName}") is not one of ${workers.join(', ')}; only members create a group`,
      );
    }
    return workers;
  }

  /** Closes every group: later calls on them reject. */
  close(): void {
    this.#closed = true;
    for (const group of this.#groups.values()) group.close();
    this.#groups.clear();
    this.#blocks.clear();
  }

  /** close(): `using collective = …` (Node 24 and later) closes it at the block's end. */
  [Symbol.dispose](): void {
    this.close();
  }
}

declare module '../context/rank-context.ts' {
  interface RankContext {
    /** This worker's p2p singleton (built on first access). */
    collective: Collective;
  }
}

extendRankContext({
  key: 'collective',
  create: (ctx: RankContext) => new Collective(ctx),
  close: (collective: Collective) => collective.close(),
});
