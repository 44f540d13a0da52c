/**
 * predictCollective: the predicted time of one call of a ThreadGroup collective (or a send) on a
 * topology, with the algorithm and protocol the model picks, and its algbw and busbw as nccl-tests
 * reports them.
 */
import { type AlphaBetaOp, type AlphaBetaSchedule, alphaBetaTime } from './alpha-beta.ts';
import { OPS, type PredictOp, type Step } from './collective-ops.ts';
import { type GroupModel, groupModel } from './group-model.ts';
import { type GroupShape, groupShape } from './group-shape.ts';
import { chooseNccl } from './nccl-model.ts';
import { p2pFanout, p2pRoundTrips, p2pSend } from './nccl-p2p.ts';
import type { NcclAlgorithm, NcclProtocol } from './nccl-tuning.ts';
import { checkBytes, checkOp, checkRanks } from './predict-input.ts';
import { loadTopology, type Topology, type TopologyInput } from './topology.ts';

export type { PredictOp };

export interface PredictCollectiveInput {
  op: PredictOp;
  /**
   * As nccl-tests counts them: the whole output of allGather (and allGatherObject), the whole input
   * of reduceScatter, the tensor of allReduce, broadcast and reduce, a rank's whole send buffer of
   * allToAll, the root's whole buffer of gather and scatter (and their object forms), the message of
   * send and recv (and their forms: recvObject, sendViews, recvViews, recvFromAny). The serialized
   * objects for the object collectives. Ignored by barrier and monitoredBarrier for the time (they
   * move a few bytes of their own).
   */
  bytes: number;
  /**
   * The group: its size (ranks 0..n-1), or its global ranks, whose placement on the topology decides
   * the links. The first rank is the root of gather and scatter and the sender of send.
   */
  ranks: number | readonly number[];
  topology: TopologyInput;
}

/**
 * `ring`, `tree`, `nvls` (NVLink SHARP), `nvls-tree` (NVLink SHARP in each node, a tree between
 * nodes) and `pat` are NCCL's algorithms; `p2p` is a call NCCL builds from point-to-point transfers
 * (send, allToAll, gather, scatter); `alpha-beta` a call priced by the alpha-beta model.
 */
export type PredictAlgorithm = NcclAlgorithm | 'p2p' | 'alpha-beta';

/** NCCL's protocols, or for the alpha-beta model the schedule it assumes. */
export type PredictProtocol = NcclProtocol | AlphaBetaSchedule;

export interface CollectivePrediction {
  /** Microseconds, launch overhead included. */
  us: number;
  algorithm: PredictAlgorithm;
  protocol: PredictProtocol;
  /** bytes / time, GB/s. */
  algbwGBps: number;
  /** algbw times nccl-tests' factor for the op. */
  busbwGBps: number;
}

interface StepTime {
  us: number;
  algorithm: PredictAlgorithm;
  protocol: PredictProtocol;
}

function ncclStep(model: Extract<GroupModel, { kind: 'nccl' }>, shape: GroupShape, step: Step): StepTime {
  const { op, bytes } = step;
  const n = shape.size;
  switch (op) {
    case 'send':
      return { ...p2pSend(model.p2p, bytes, shape.nodes === 1), algorithm: 'p2p' };
    case 'allToAll': {
      // Every rank sends a piece to every other; the busiest node's ranks finish last.
      const slowest = shape.perNode
        .map((local) =>
          p2pFanout(model.p2p, { localPeers: local - 1, remotePeers: n - local, pieceBytes: bytes / n }),
        )
        .reduce((a, b) => (b.us > a.us ? b : a));
      return { ...slowest, algorithm: 'p2p' };
    }
    case 'gather':
    case 'scatter': {
      const local = shape.rootLocal;
      const fanout = { localPeers: local - 1, remotePeers: n - local, pieceBytes: bytes / n };
      return { ...p2pFanout(model.p2p, fanout), algorithm: 'p2p' };
    }
    case 'monitoredBarrier':
      return {
        ...p2pRoundTrips(model.p2p, shape.rootLocal - 1, n - shape.rootLocal, bytes),
        algorithm: 'p2p',
      };
    default:
      return chooseNccl(model.comm, op, bytes);
  }
}

function alphaBetaStep(
  model: Extract<GroupModel, { kind: 'alpha-beta' }>,
  shape: GroupShape,
  step: Step,
): StepTime {
  const n = shape.size;
  if (step.op === 'send') {
    const link = shape.nodes === 1 ? model.intra : (model.inter ?? model.group);
    const { us, schedule } = alphaBetaTime('send', 2, step.bytes, link);
    return { us, algorithm: 'alpha-beta', protocol: schedule };
  }
  if (step.op === 'monitoredBarrier') {
    // Rank 0 receives from and answers every other rank in turn.
    const { us } = alphaBetaTime('send', 2, step.bytes, model.group);
    return { us: 2 * (n - 1) * us, algorithm: 'alpha-beta', protocol: 'linear' };
  }
  const { us, schedule } = alphaBetaTime(step.op satisfies AlphaBetaOp, n, step.bytes, model.group);
  return { us, algorithm: 'alpha-beta', protocol: schedule };
}

function stepTime(topology: Topology, shape: GroupShape, step: Step): StepTime {
  const model = groupModel(topology, shape);
  if (shape.size === 1) {
    // NCCL's cost table for one rank: ring, Simple, no time (enqueue.cc updateCollCostTable).
    return model.kind === 'nccl'
      ? { us: 0, algorithm: 'ring', protocol: 'Simple' }
      : { us: 0, algorithm: 'alpha-beta', protocol: 'direct' };
  }
  return model.kind === 'nccl' ? ncclStep(model, shape, step) : alphaBetaStep(model, shape, step);
}

/** The predicted time of one call; see PredictCollectiveInput for what each field means. */
export function predictCollective(input: PredictCollectiveInput): CollectivePrediction {
  if (typeof input !== 'object' || input === null) {
    throw new TypeError('predictCollective: expected { op, bytes, ranks, topology }');
  }
  const op = checkOp(input.op);
  const bytes = checkBytes(input.bytes);
  const topology = loadTopology(input.topology);
  const ranks = checkRanks(topology, input.ranks);
  const plan = OPS[op];
  if (plan.pair && ranks.length > 2) {
    throw new RangeError(`predictCollective: ${op} moves bytes between two ranks; ranks has ${ranks.length}`);
  }
  const shape = groupShape(topology, ranks);
  let us = 0;
  let reported: StepTime | undefined;
  for (const step of plan.steps(ranks.length, bytes)) {
    const time = stepTime(topology, shape, step);
    us += time.us + topology.spec.launchOverheadUs;
    if (step.payload) reported = time;
  }
  const { algorithm, protocol } = reported as StepTime;
  // GB/s is 1e3 bytes per microsecond.
  const algbwGBps = us > 0 ? bytes / us / 1000 : 0;
  return { us, algorithm, protocol, algbwGBps, busbwGBps: algbwGBps * plan.busbw(ranks.length) };
}
