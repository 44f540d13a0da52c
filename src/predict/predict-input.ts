/** predictCollective's arguments checked: a TypeError or RangeError naming the field. */
import { OPS, type PredictOp } from './collective-ops.ts';
import type { Topology } from './topology.ts';

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : Array.isArray(value) ? 'a list' : String(value);
}

export function checkOp(op: unknown): PredictOp {
  if (typeof op !== 'string' || !Object.hasOwn(OPS, op)) {
    throw new TypeError(
      `predictCollective: op ${describe(op)} is not a collective; expected one of ${Object.keys(OPS).join(', ')}`,
    );
  }
  return op as PredictOp;
}

export function checkBytes(bytes: unknown): number {
  if (typeof bytes !== 'number') {
    throw new TypeError(`predictCollective: bytes: expected a number, got ${describe(bytes)}`);
  }
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new RangeError(`predictCollective: bytes: expected a non-negative integer, got ${bytes}`);
  }
  return bytes;
}

function checkRank(topology: Topology, rank: unknown, label: string): number {
  if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 0) {
    throw new RangeError(
      `predictCollective: ${label}: expected a rank (an integer >= 0), got ${describe(rank)}`,
    );
  }
  try {
    topology.placementOf(rank);
  } catch (error) {
    throw new RangeError(`predictCollective: ${label}: ${(error as Error).message}`, { cause: error });
  }
  return rank;
}

export function checkRanks(topology: Topology, ranks: unknown): number[] {
  if (typeof ranks === 'number') {
    if (!Number.isInteger(ranks) || ranks < 1) {
      throw new RangeError(
        `predictCollective: ranks: expected a group size >= 1 or a list of ranks, got ${ranks}`,
      );
    }
    if (ranks > topology.gpus) {
      throw new RangeError(
        `predictCollective: ranks: ${ranks} ranks do not fit topology '${topology.name}' (${topology.gpus} GPUs)`,
      );
    }
    return Array.from({ length: ranks }, (_, r) => checkRank(topology, r, 'ranks'));
  }
  if (!Array.isArray(ranks) || ranks.length === 0) {
    throw new TypeError(
      `predictCollective: ranks: expected a group size or a non-empty list of ranks, got ${describe(ranks)}`,
    );
  }
  const seen = new Map<number, number>();
  return ranks.map((rank: unknown, index) => {
    const checked = checkRank(topology, rank, `ranks[${index}]`);
    const first = seen.get(checked);
    if (first !== undefined) {
      throw new RangeError(
        `predictCollective: ranks: rank ${checked} appears twice (ranks[${first}] and ranks[${index}])`,
      );
    }
    seen.set(checked, index);
    return checked;
  });
}
