/**
 * DTensor: a global tensor spread over a DeviceMesh. Each rank keeps its
 * local block plus what it takes to interpret it: the global shape and one
 * placement per mesh dimension. Every method that talks is collective over
 * the mesh (or the mesh dims it touches): all members call it in the same order.
 */
import { layerCall } from '../predict/layer-clock.ts';
import { Work } from '../runtime/work.ts';
import type { DType } from '../tensor/dtype.ts';
import { Tensor } from '../tensor/tensor.ts';
import { describeValue } from '../tensor/validate.ts';
import { assertMesh, type DeviceMesh } from './device-mesh.ts';
import { blockOf, localBlock } from './local-block.ts';
import { formatPlacements, normalizePlacements, type Placement, Replicate } from './placement.ts';
import { runTransition } from './redistribute.ts';
import { planRedistribute } from './redistribute-plan.ts';

export interface FromLocalOptions {
  /**
   * The global shape. Without it every shard is taken to be full-sized
   * (global = local × mesh size along each sharding mesh dim), which is
   * right only for even shards: pass it when shards are uneven.
   */
  shape?: readonly number[];
}

export class DTensor {
  readonly mesh: DeviceMesh;
  readonly placements: readonly Placement[];
  /** The global shape. */
  readonly shape: readonly number[];
  readonly #local: Tensor;

  private constructor(local: Tensor, mesh: DeviceMesh, placements: Placement[], shape: readonly number[]) {
    this.#local = local;
    this.mesh = mesh;
    this.placements = Object.freeze(placements);
    this.shape = Object.freeze([...shape]);
  }

  /** Wraps this rank's block (no communication); a non-contiguous `local` is copied. */
  static fromLocal(
    local: Tensor,
    mesh: DeviceMesh,
    placements: readonly Placement[],
    options: FromLocalOptions = {},
  ): DTensor {
    const where = 'DTensor.fromLocal';
    if (!(local instanceof Tensor))
      throw new TypeError(`${where}: local must be a Tensor, got ${describeValue(local)}`);
    assertMesh(mesh, where);
    const norm = normalizePlacements(placements, mesh.ndim, local.shape.length, local.dtype, where);
    const shape = options.shape ?? evenShape(local.shape, norm, mesh.shape);
    if (
      !Array.isArray(shape) ||
      shape.length !== local.shape.length ||
      shape.some((s) => !Number.isSafeInteger(s) || s < 0)
    ) {
      throw new TypeError(
        `${where}: shape must list ${local.shape.length} non-negative integers (local is ${local.describe()}), got ${String(shape)}`,
      );
    }
    const block = blockOf(shape, norm, mesh.shape, mesh.coordinate).map((s) => s.length);
    if (block.some((size, d) => size !== local.shape[d])) {
      throw new RangeError(
        `${where}: local ${local.describe()} is not the [${block}] block that mesh coordinate ` +
          `[${mesh.coordinate}] holds of global shape [${shape}] under ${formatPlacements(norm)}`,
      );
    }
    return new DTensor(local.contiguous(), mesh, norm, shape);
  }

  get dtype(): DType {
    return this.#local.dtype;
  }

  /** This rank's block (shared, not copied: do not write to it while others may read it). */
  toLocal(): Tensor {
    return this.#local;
  }

  /** A DTensor of the same value under `placements`, reached one mesh dimension at a time. */
  redistribute(placements: readonly Placement[]): Work<DTensor> {
    return this.#redistributed(placements, (d) => d);
  }

  /** The global tensor, on every rank of the mesh. */
  full(): Work<Tensor> {
    return this.#redistributed(
      this.placements.map(() => Replicate()),
      (d) => d.#local,
    );
  }

  /**
   * `result` of the redistributed DTensor. In predict mode the steps are one
   * layer call (predict/layer-clock.ts): each step is issued when the one
   * before it ended, and the program's wait on the Work moves the rank's clock.
   */
  #redistributed<T>(placements: readonly Placement[], result: (d: DTensor) => T): Work<T> {
    const layer = layerCall();
    return layer.settle(
      Work.run(async () => {
        const where = 'DTensor.redistribute';
        const target = normalizePlacements(placements, this.mesh.ndim, this.shape.length, this.dtype, where);
        let local = this.#local;
        for (const step of planRedistribute(this.placements, target, where)) {
          const from = local;
          local = await layer.run(() => runTransition(from, step, this.shape, this.mesh));
        }
        return result(new DTensor(local, this.mesh, target, this.shape));
      }),
    );
  }

  toString(): string {
    return `DTensor(${this.dtype}[${this.shape}], ${this.mesh}, ${formatPlacements(this.placements)})`;
  }
}

/**
 * Broadcasts `full` from mesh index `src` (coordinate 0 by default) over the
 * mesh, then keeps this rank's block. Every rank passes a tensor of the same
 * shape and dtype; only the source's values are used.
 */
export function distributeTensor(
  full: Tensor,
  mesh: DeviceMesh,
  placements: readonly Placement[],
  options: { src?: number } = {},
): Work<DTensor> {
  // One layer call in predict mode (predict/layer-clock.ts): the program's wait on it moves the rank's clock.
  const layer = layerCall();
  return layer.settle(
    layer.run(() =>
      Work.run(async () => {
        const where = 'distributeTensor';
        if (!(full instanceof Tensor)) {
          throw new TypeError(`${where}: full must be a Tensor on every rank, got ${describeValue(full)}`);
        }
        assertMesh(mesh, where);
        const norm = normalizePlacements(placements, mesh.ndim, full.shape.length, full.dtype, where);
        const src = options.src ?? 0;
        const value = mesh.rank === src ? full.contiguous() : Tensor.empty(full.shape, full.dtype);
        await mesh.group().broadcast(value, { src });
        return DTensor.fromLocal(localBlock(value, norm, mesh.shape, mesh.coordinate), mesh, norm, {
          shape: full.shape,
        });
      }),
    ),
  );
}

/** Global shape of even shards: each sharding mesh dim multiplies its tensor dim. */
function evenShape(
  local: readonly number[],
  placements: readonly Placement[],
  meshShape: readonly number[],
): number[] {
  const shape = [...local];
  placements.forEach((p, m) => {
    if (p.kind === 'shard') shape[p.dim] *= meshShape[m];
  });
  return shape;
}
