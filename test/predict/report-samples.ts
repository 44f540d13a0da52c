/**
 * Two hand-built reports of one 2-rank program, on two made-up topologies,
 * with round numbers so the tests can state every figure: b runs the
 * allReduces twice as fast and the allGather at half speed; only a has the
 * send/recv pair, only b the barrier.
 */
import type { PredictedCall, PredictReport } from '../../src/predict/report.ts';

type Shape = Omit<PredictedCall, 'rank'>;

/** The same call on both ranks, as a collective appears in a report. */
function onBoth(shape: Shape): PredictedCall[] {
  return [
    { rank: 0, ...shape },
    { rank: 1, ...shape },
  ];
}

function call(
  seq: number,
  op: string,
  bytes: number,
  [algorithm, protocol]: [string, string],
  [startUs, endUs]: [number, number],
  busbwGBps: number,
): Shape {
  return { group: 'world', seq, op, bytes, algorithm, protocol, startUs, endUs, busbwGBps };
}

/** A two-node report's ranks, each ending at `endUs` with nothing to add up: for tests of its calls alone. */
export function twoNodeReport(worldSize: number, endUs: number, calls: PredictedCall[]): PredictReport {
  const ranks = Array.from({ length: worldSize }, (_, rank) => ({
    rank,
    endUs,
    computeUs: 0,
    commUs: 0,
    exposedCommUs: 0,
    waitUs: 0,
  }));
  return { topology: 'two nodes', ranks, calls };
}

export function reportA(): PredictReport {
  return {
    topology: 'test-a',
    ranks: [
      { rank: 0, endUs: 100, computeUs: 60, commUs: 56, exposedCommUs: 30, waitUs: 4 },
      { rank: 1, endUs: 110, computeUs: 70, commUs: 56, exposedCommUs: 36, waitUs: 0 },
    ],
    calls: [
      ...onBoth(call(0, 'allReduce', 1_000_000, ['ring', 'Simple'], [0, 20], 50)),
      ...onBoth(call(1, 'allReduce', 1_000_000, ['ring', 'Simple'], [30, 50], 50)),
      ...onBoth(call(2, 'allGather', 4000, ['ring', 'LL'], [50, 54], 0.5)),
      { rank: 0, ...call(0, 'send', 2000, ['p2p', 'Simple'], [60, 62], 1), peer: 1 },
      { rank: 1, ...call(0, 'recv', 2000, ['p2p', 'Simple'], [60, 62], 1), peer: 0 },
      ...onBoth(call(3, 'allReduce', 500_000, ['ring', 'LL128'], [70, 80], 50)),
    ],
  };
}

export function reportB(): PredictReport {
  return {
    topology: 'test-b',
    ranks: [
      { rank: 0, endUs: 80, computeUs: 60, commUs: 34, exposedCommUs: 20, waitUs: 0 },
      { rank: 1, endUs: 88, computeUs: 70, commUs: 34, exposedCommUs: 18, waitUs: 2 },
    ],
    calls: [
      ...onBoth(call(0, 'allReduce', 1_000_000, ['nvls', 'Simple'], [0, 10], 100)),
      ...onBoth(call(1, 'allReduce', 1_000_000, ['nvls', 'Simple'], [15, 25], 100)),
      ...onBoth(call(2, 'allGather', 4000, ['ring', 'LL'], [25, 33], 0.25)),
      ...onBoth(call(3, 'allReduce', 500_000, ['nvls', 'LL128'], [40, 45], 100)),
      ...onBoth(call(4, 'barrier', 0, ['ring', 'LL'], [60, 61], 0)),
    ],
  };
}
