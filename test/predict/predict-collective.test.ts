/** predictCollective: every op, nccl-tests' byte counts and bus bandwidth factors, placement, bad input. */
import { describe, expect, it } from 'vitest';
import { type PredictOp, predictCollective, type TopologySpec } from '../../src/index.ts';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

const predict = (op: PredictOp, bytes: number, ranks: number | number[], topology = 'h100-nvlink') =>
  predictCollective({ op, bytes, ranks, topology });

describe('ops', () => {
  it("takes every ThreadGroup collective's name, send and recv and their forms", () => {
    const ops: PredictOp[] = [
      'allReduce',
      'broadcast',
      'reduce',
      'allGather',
      'allGatherInto',
      'reduceScatter',
      'reduceScatterTensor',
      'allToAll',
      'allToAllSingle',
      'gather',
      'scatter',
      'barrier',
      'monitoredBarrier',
      'broadcastObject',
      'allGatherObject',
      'gatherObject',
      'scatterObject',
    ];
    for (const op of ops) expect(predict(op, MiB, 8).us, op).toBeGreaterThan(0);
    for (const op of ['send', 'recv', 'sendViews', 'recvViews', 'recvFromAny', 'recvObject'] as const) {
      expect(predict(op, MiB, [0, 5]).us, op).toBeGreaterThan(0);
    }
  });

  it('the tensor forms are the same calls', () => {
    expect(predict('allGatherInto', GiB, 8)).toEqual(predict('allGather', GiB, 8));
    expect(predict('reduceScatterTensor', GiB, 8)).toEqual(predict('reduceScatter', GiB, 8));
    expect(predict('allToAllSingle', GiB, 8)).toEqual(predict('allToAll', GiB, 8));
    expect(predict('recv', MiB, [3, 4])).toEqual(predict('send', MiB, [3, 4]));
  });

  it("busbw by nccl-tests' factors", () => {
    const factor = (op: PredictOp, ranks = 8) => {
      const p = predict(op, GiB, ranks);
      return p.busbwGBps / p.algbwGBps;
    };
    expect(factor('allReduce')).toBeCloseTo((2 * 7) / 8, 12);
    expect(factor('allGather')).toBeCloseTo(7 / 8, 12);
    expect(factor('reduceScatter')).toBeCloseTo(7 / 8, 12);
    expect(factor('allToAll')).toBeCloseTo(7 / 8, 12);
    expect(factor('gather')).toBeCloseTo(7 / 8, 12);
    expect(factor('broadcast')).toBe(1);
    expect(factor('reduce')).toBe(1);
    expect(factor('send', 2)).toBe(1);
    const p = predict('allReduce', GiB, 8);
    expect(p.algbwGBps).toBeCloseTo(GiB / p.us / 1000, 12);
  });

  it("barrier all-reduces one float32, whatever bytes says (torch's NCCL barrier)", () => {
    expect(predict('barrier', 0, 8).us).toBe(predict('allReduce', 4, 8).us);
    expect(predict('barrier', GiB, 8).us).toBe(predict('allReduce', 4, 8).us);
  });

  it("object collectives are torch's: a size exchange, then the payload", () => {
    const eight = (op: PredictOp, bytes: number) => predict(op, bytes, 8).us;
    expect(eight('broadcastObject', MiB)).toBeCloseTo(eight('broadcast', 8) + eight('broadcast', MiB), 9);
    expect(eight('allGatherObject', MiB)).toBeCloseTo(eight('allGather', 64) + eight('allGather', MiB), 9);
    expect(eight('gatherObject', MiB)).toBeCloseTo(eight('allGather', 64) + eight('gather', MiB), 9);
    expect(eight('scatterObject', MiB)).toBeCloseTo(
      eight('broadcast', 8) + eight('scatter', MiB) + eight('scatter', 64),
      9,
    );
    const pair = (op: PredictOp, bytes: number) => predict(op, bytes, [0, 1]).us;
    expect(pair('recvObject', MiB)).toBeCloseTo(pair('send', 8) + pair('send', MiB), 9);
    // The payload's algorithm is reported.
    expect(predict('allGatherObject', GiB, 8)).toMatchObject({ algorithm: 'ring', protocol: 'Simple' });
  });

  it('launch overhead counts once a call, twice for a two-call object collective', () => {
    const slow = { preset: 'h100-nvlink', launchOverheadUs: 10 } as const;
    expect(predictCollective({ op: 'allReduce', bytes: MiB, ranks: 8, topology: slow }).us).toBeCloseTo(
      predict('allReduce', MiB, 8).us + 10,
      9,
    );
    expect(predictCollective({ op: 'broadcastObject', bytes: MiB, ranks: 8, topology: slow }).us).toBeCloseTo(
      predict('broadcastObject', MiB, 8).us + 20,
      9,
    );
  });

  it('one rank costs the launch overhead only', () => {
    expect(predict('allReduce', GiB, 1)).toEqual({
      us: 0,
      algorithm: 'ring',
      protocol: 'Simple',
      algbwGBps: 0,
      busbwGBps: 0,
    });
    const p = predictCollective({
      op: 'allGather',
      bytes: GiB,
      ranks: [5],
      topology: { preset: 'h100-ib', launchOverheadUs: 4 },
    });
    expect(p.us).toBe(4);
  });
});

describe('point-to-point calls over NCCL links', () => {
  it('send: one ring step of latency, the bandwidth NCCL finds for two GPUs', () => {
    // Inside a node: Simple, 8.4 + 3.4 + 1 GiB / 360 GB/s (12 channels x 30)
    expect(predict('send', GiB, [0, 1], 'h100-ib').us).toBeCloseTo(11.8 + GiB / 360_000, 6);
    // Across nodes: one NIC (PCIe-capped 48, as 2 x 24); 8.4 + 14 + 1 GiB / 48 GB/s
    const across = predict('send', GiB, [0, 8], 'h100-ib');
    expect(across).toMatchObject({ algorithm: 'p2p', protocol: 'Simple' });
    expect(across.us).toBeCloseTo(22.4 + GiB / 48_000, 6);
    // Up to 16 KiB, LL: 6.6 + 0.6 + 16 KiB / min(141, 360 x .5)
    const small = predict('send', 16_384, [0, 1], 'h100-ib');
    expect(small).toMatchObject({ protocol: 'LL' });
    expect(small.us).toBeCloseTo(7.2 + 16_384 / 141_000, 9);
  });

  it('allToAll: pieces go out at once; the NIC side is slower across nodes', () => {
    // 8 ranks on a node: 7 pieces of S/8 over NVLink, 8.4 + 3.4 + 7/8 S / 360 GB/s
    expect(predict('allToAll', GiB, 8).us).toBeCloseTo(11.8 + (GiB * 7) / 8 / 360_000, 6);
    // 16 ranks on 2 nodes: 8 pieces of S/16 leave through one NIC at 48 GB/s: 22.4 + S/2 / 48 GB/s
    const across = predict('allToAll', GiB, 16, 'h100-ib');
    expect(across).toMatchObject({ algorithm: 'p2p', protocol: 'Simple' });
    expect(across.us).toBeCloseTo(22.4 + GiB / 2 / 48_000, 6);
  });

  it("gather and scatter: the root's fan-in and fan-out, the root being the first rank", () => {
    // Root 8 on node 1 with rank 9; ranks 0 and 1 elsewhere: 1 piece over NVLink, 2 through the NIC.
    const p = predict('gather', GiB, [8, 9, 0, 1], 'h100-ib');
    expect(p.us).toBeCloseTo(Math.max(11.8 + GiB / 4 / 360_000, 22.4 + GiB / 2 / 48_000), 6);
    expect(predict('scatter', GiB, [8, 9, 0, 1], 'h100-ib').us).toBe(p.us);
  });
});

describe('placement decides the links', () => {
  it('the same group size is slower across nodes than inside one', () => {
    const inside = predict('allReduce', GiB, [0, 1, 2, 3], 'h100-ib').us;
    const across = predict('allReduce', GiB, [0, 1, 8, 9], 'h100-ib').us;
    expect(across).toBeGreaterThan(2 * inside);
  });

  it("a topology's placement moves ranks", () => {
    const spread: TopologySpec = {
      name: 'spread',
      nodes: 2,
      gpusPerNode: 8,
      intraNode: { kind: 'nvlink', bandwidthGBps: 370.8 },
      interNode: { kind: 'ib', bandwidthGBps: 50, nics: 8 },
      // Ranks alternate between the nodes.
      placement: Array.from({ length: 16 }, (_, r) => ({ node: r % 2, gpu: Math.floor(r / 2) })),
    };
    const pair = predictCollective({ op: 'send', bytes: GiB, ranks: [0, 1], topology: spread });
    expect(pair.us).toBeCloseTo(predict('send', GiB, [0, 8], 'h100-ib').us, 9);
  });
});

describe('bad input names the field', () => {
  it('an unknown op', () => {
    const call = () => predict('allreduce' as PredictOp, 1, 2);
    expect(call).toThrow(TypeError);
    expect(call).toThrow(
      /^predictCollective: op "allreduce" is not a collective; expected one of allReduce, broadcast/,
    );
  });

  it('bytes that are not a count', () => {
    expect(() => predict('allReduce', -1, 2)).toThrow(
      /predictCollective: bytes: expected a non-negative integer, got -1/,
    );
    expect(() => predict('allReduce', Number.NaN, 2)).toThrow(RangeError);
    expect(() => predict('allReduce', Number.POSITIVE_INFINITY, 2)).toThrow(RangeError);
    expect(() => predict('allReduce', 1.5, 2)).toThrow(RangeError);
    expect(() => predict('allReduce', '8' as never, 2)).toThrow(TypeError);
  });

  it('ranks beyond the topology, naming both numbers', () => {
    expect(() => predict('allReduce', 1, 16)).toThrow(
      new RangeError("predictCollective: ranks: 16 ranks do not fit topology 'h100-nvlink' (8 GPUs)"),
    );
    expect(() => predict('allReduce', 1, [0, 9])).toThrow(
      new RangeError("predictCollective: ranks[1]: topology 'h100-nvlink' has 8 GPUs; rank 9 has none"),
    );
  });

  it('duplicate, negative or no ranks', () => {
    expect(() => predict('allReduce', 1, [0, 3, 1, 3])).toThrow(
      new RangeError('predictCollective: ranks: rank 3 appears twice (ranks[1] and ranks[3])'),
    );
    expect(() => predict('allReduce', 1, [0, -1])).toThrow(
      /ranks\[1\]: expected a rank \(an integer >= 0\), got -1/,
    );
    expect(() => predict('allReduce', 1, [])).toThrow(TypeError);
    expect(() => predict('allReduce', 1, 0)).toThrow(/ranks: expected a group size >= 1/);
  });

  it('a send between more than two ranks', () => {
    expect(() => predict('send', 1, [0, 1, 2])).toThrow(/send moves bytes between two ranks; ranks has 3/);
  });

  it('a bad topology is the topology error', () => {
    expect(() => predict('allReduce', 1, 2, 'dgx')).toThrow(/unknown preset "dgx"/);
    expect(() => predictCollective(undefined as never)).toThrow(TypeError);
  });
});
