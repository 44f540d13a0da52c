/**
 * DeviceMesh: the ranks of a ThreadGroup laid out row-major in an n-d grid
 * (e.g. [2, 2] for data × tensor parallel). Each mesh dimension has a
 * sub-group per line of the grid, taken from the ThreadGroupManager so every
 * user of the same member set shares one group.
 */

import { currentRankContext } from '../context/rank-context.ts';
import { InvalidStateError } from '../runtime/errors.ts';
import { RankLocal } from '../runtime/rank-local.ts';
import type { TensorStore } from '../runtime/tensor-store.ts';
import { describeValue } from '../tensor/validate.ts';
import { groupKeyPrefix } from '../thread-group/group-id.ts';
import { ThreadGroup } from '../thread-group/thread-group.ts';
import type { ThreadGroupManager } from '../thread-group/thread-group-manager.ts';

export interface DeviceMeshOptions {
  /** Source of the per-dimension groups; defaults to the current rank's `ctx.manager`. */
  manager?: ThreadGroupManager;
  /** The store scatterTensor / gatherTensor go through; defaults to the current rank's `ctx.store`. */
  store?: TensorStore;
}

/** Meshes built over the same ranks and shape, per rank: ranks build them in the same order. */
const meshes = new RankLocal(() => new Map<string, number>());

export class DeviceMesh {
  readonly shape: readonly number[];
  /** Global ranks in mesh order (row-major over `shape`). */
  readonly ranks: readonly number[];
  /** This rank's index in `ranks`. */
  readonly rank: number;
  /** This rank's coordinate, one entry per mesh dimension. */
  readonly coordinate: readonly number[];
  /** Prefix for store keys, the same on every member. */
  readonly id: string;
  readonly #store: TensorStore | undefined;
  readonly #whole: ThreadGroup;
  readonly #dims: readonly ThreadGroup[];

  constructor(group: ThreadGroup, shape: readonly number[], options: DeviceMeshOptions = {}) {
    const where = 'DeviceMesh';
    if (!(group instanceof ThreadGroup)) throw new TypeError(`${where}: group must be a ThreadGroup`);
    if (!group.isMember) {
      throw new InvalidStateError(
        `${where}: this rank is not a member of group "${group.name}" (${group.ranks.join(', ')})`,
      );
    }
    if (!Array.isArray(shape) || shape.length === 0 || shape.some((s) => !Number.isSafeInteger(s) || s < 1)) {
      throw new TypeError(
        `${where}: shape must be a non-empty array of positive integers, got ${String(shape)}`,
      );
    }
    const size = shape.reduce((a, b) => a * b, 1);
    if (size !== group.size) {
      throw new RangeError(
        `${where}: shape [${shape.join(',')}] has ${size} coordinates but group "${group.name}" has ${group.size} ranks`,
      );
    }
    const context = currentRankContext();
    const manager = options.manager ?? context?.manager;
    if (!manager) {
      throw new InvalidStateError(`${where}: no rank context is current here; pass { manager: ctx.manager }`);
    }
    this.shape = Object.freeze([...shape]);
    this.ranks = group.ranks;
    this.rank = group.rank;
    this.coordinate = Object.freeze(this.coordinateOf(group.rank));
    this.#store = options.store ?? context?.store;
    this.#whole = manager.getGroup(this.ranks);
    this.#dims = this.shape.map((extent, d) => {
      const line = Array.from({ length: extent }, (_, i) => {
        const coord = [...this.coordinate];
        coord[d] = i;
        return this.rankAt(coord);
      });
      const sub = manager.getGroup(line);
      // Group ranks follow sorted global ranks; collectives below rely on them matching mesh coordinates.
      // The mesh's ranks are the group's, ascending, so this holds: only a bug in tensorcomm breaks it.
      if (sub.rank !== this.coordinate[d]) {
        throw new Error(`${where}: group of mesh dim ${d} orders its ranks unlike the mesh (${sub.ranks})`);
      }
      return sub;
    });
    const layout = `${this.shape.join('x')}:${this.ranks.join('.')}`;
    const instances = meshes.get();
    const instance = instances.get(layout) ?? 0;
    instances.set(layout, instance + 1);
    this.id = groupKeyPrefix('dt', layout, instance);
  }

  get ndim(): number {
    return this.shape.length;
  }

  get size(): number {
    return this.ranks.length;
  }

  /** The group along mesh dimension `dim`, or of the whole mesh when `dim` is omitted. */
  group(dim?: number): ThreadGroup {
    if (dim === undefined) return this.#whole;
    return this.#dims[this.#checkDim(dim, 'DeviceMesh.group')];
  }

  sizeOf(dim: number): number {
    return this.shape[this.#checkDim(dim, 'DeviceMesh.sizeOf')];
  }

  /** The coordinate of the rank at mesh index `index`. */
  coordinateOf(index: number): number[] {
    if (!Number.isInteger(index) || index < 0 || index >= this.size) {
      throw new RangeError(`DeviceMesh.coordinateOf: ${index} is not an index of a ${this.size}-rank mesh`);
    }
    const coord = new Array<number>(this.ndim);
    for (let d = this.ndim - 1; d >= 0; d--) {
      coord[d] = index % this.shape[d];
      index = Math.floor(index / this.shape[d]);
    }
    return coord;
  }

  /** The global rank at `coordinate`. */
  rankAt(coordinate: readonly number[]): number {
    if (
      coordinate.length !== this.ndim ||
      coordinate.some((c, d) => !Number.isInteger(c) || c < 0 || c >= this.shape[d])
    ) {
      throw new RangeError(`DeviceMesh.rankAt: [${coordinate}] is not a coordinate of mesh [${this.shape}]`);
    }
    return this.ranks[coordinate.reduce((index, c, d) => index * this.shape[d] + c, 0)];
  }

  /** The store behind scatterTensor / gatherTensor. */
  store(where = 'DeviceMesh.store'): TensorStore {
    if (!this.#store) {
      throw new InvalidStateError(
        `${where}: the mesh has no TensorStore; build it with { store: ctx.store }`,
      );
    }
    return this.#store;
  }

  toString(): string {
    return `DeviceMesh([${this.shape.join(', ')}], ranks [${this.ranks.join(', ')}])`;
  }

  #checkDim(dim: number, where: string): number {
    if (!Number.isInteger(dim) || dim < 0 || dim >= this.ndim) {
      throw new RangeError(`${where}: dim ${dim} is not a dimension of mesh [${this.shape.join(',')}]`);
    }
    return dim;
  }
}

export function assertMesh(value: unknown, where: string): asserts value is DeviceMesh {
  if (!(value instanceof DeviceMesh)) {
    throw new TypeError(`${where}: mesh must be a DeviceMesh, got ${describeValue(value)}`);
  }
}
