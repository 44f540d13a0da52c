/**
 * Calibration: the alpha-beta fit recovers a link (alpha, B, and D and G
 * where the points show them) exactly from points the model itself made,
 * fits noisy points without failing, and `tensorcomm predict calibrate` writes a topology of
 * alpha-beta links that loadTopology takes, or says what is wrong with its
 * command line. No timing is asserted: the machine's figures are the bench's.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest';
import { predictCommand } from '../../src/cli/predict.ts';
import { type AlphaBetaLink, type AlphaBetaOp, alphaBetaTime } from '../../src/predict/alpha-beta.ts';
import { type CalibrationPoint, fitAlphaBeta } from '../../src/predict/calibration-fit.ts';
import { loadTopology } from '../../src/predict/topology.ts';

const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-calibrate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The model's own time for each op at each size: what a perfect machine would measure. */
function points(link: AlphaBetaLink, ops: readonly AlphaBetaOp[], ranks: number, sizes: number[]) {
  return ops.flatMap((op) =>
    sizes.map((bytes) => ({ op, ranks, bytes, us: alphaBetaTime(op, ranks, bytes, link).us })),
  );
}

describe('fitAlphaBeta', () => {
  const sizes = [4096, 65536, 1 << 20, 16 << 20];

  it('recovers alpha and bandwidth exactly from the model, whatever ops and ranks the points come from', () => {
    const link = { alphaUs: 12.5, bandwidthGBps: 3.25 };
    for (const [ops, ranks] of [
      [['send', 'allReduce'], 2],
      [['allGather', 'reduceScatter', 'broadcast'], 4],
      [['allReduce'], 8],
    ] as Array<[AlphaBetaOp[], number]>) {
      const fit = fitAlphaBeta(points(link, ops, ranks, sizes));
      expect(fit.alphaUs).toBeCloseTo(12.5, 9);
      expect(fit.bandwidthGBps).toBeCloseTo(3.25, 9);
      expect(fit.rmsError).toBeLessThan(1e-12);
    }
  });

  it('recovers D and G beside alpha and B from a send, an exchange and a reducing call, at two sizes', () => {
    const link = { alphaUs: 30, bandwidthGBps: 8, duplexGBps: 4, reduceGBps: 10 };
    for (const [ops, ranks] of [
      [['send', 'allToAll', 'allReduce'], 2],
      [['broadcast', 'allGather', 'reduceScatter'], 4],
    ] as Array<[AlphaBetaOp[], number]>) {
      const fit = fitAlphaBeta(points(link, ops, ranks, [4096, 32 << 20]));
      expect(fit.alphaUs).toBeCloseTo(30, 6);
      expect(fit.bandwidthGBps).toBeCloseTo(8, 6);
      expect(fit.duplexGBps).toBeCloseTo(4, 6);
      expect(fit.reduceGBps).toBeCloseTo(10, 6);
      expect(fit.rmsError).toBeLessThan(1e-9);
    }
  });

  it('keeps the defaults of the rates the points cannot show: D = B without an exchange, G free without a reduction', () => {
    const link = { alphaUs: 12.5, bandwidthGBps: 3.25 };
    const oneWay = fitAlphaBeta(points(link, ['send', 'broadcast'], 2, sizes));
    expect(oneWay).not.toHaveProperty('duplexGBps');
    expect(oneWay).not.toHaveProperty('reduceGBps');
    // An exchange beside the sends, no reduction: D is fitted (here B), reductions stay free.
    const exchanged = fitAlphaBeta(points(link, ['send', 'allGather'], 2, sizes));
    expect(exchanged.duplexGBps).toBeCloseTo(3.25, 9);
    expect(exchanged).not.toHaveProperty('reduceGBps');
  });

  it('fits noisy points without failing: every term positive and finite', () => {
    // A fixed pseudo-random sequence (a linear congruential generator): each time off by up to +-50%.
    let seed = 41;
    const noise = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return 0.5 + seed / 2 ** 31;
    };
    const link = { alphaUs: 40, bandwidthGBps: 8, duplexGBps: 4, reduceGBps: 10 };
    for (let trial = 0; trial < 200; trial++) {
      const noisy = points(link, ['send', 'allToAll', 'allReduce'], 2, [4096, 32 << 20]).map((p) => ({
        ...p,
        us: p.us * noise(),
      }));
      const fit = fitAlphaBeta(noisy);
      for (const value of [fit.bandwidthGBps, fit.duplexGBps ?? 1, fit.reduceGBps ?? 1, fit.rmsError])
        expect(value > 0 && Number.isFinite(value)).toBe(true);
      expect(fit.alphaUs).toBeGreaterThanOrEqual(0);
    }
  });

  it('two sizes of one op are enough; alpha 0 is found as 0', () => {
    const fit = fitAlphaBeta(points({ alphaUs: 0, bandwidthGBps: 40 }, ['send'], 2, [1024, 1 << 24]));
    expect(fit.alphaUs).toBeCloseTo(0, 9);
    expect(fit.bandwidthGBps).toBeCloseTo(40, 9);
  });

  it('weighs each point by its relative error, so noise on the largest size barely moves alpha', () => {
    // 5% slower at 16 MiB (84 us): plain least squares would put alpha at 18.1 us, the relative fit at 19.9.
    const exact = points({ alphaUs: 20, bandwidthGBps: 10 }, ['send'], 2, sizes);
    const noisy = exact.map((p, i) => (i === exact.length - 1 ? { ...p, us: p.us * 1.05 } : p));
    expect(fitAlphaBeta(noisy).alphaUs).toBeCloseTo(19.88, 2);
  });

  it('a fit whose alpha would be negative is redone with alpha 0', () => {
    // Small sizes faster than the large ones' line through zero: least squares alone gives alpha < 0.
    const sends: CalibrationPoint[] = [
      { op: 'send', ranks: 2, bytes: 1 << 20, us: 50 },
      { op: 'send', ranks: 2, bytes: 1 << 24, us: 1000 },
    ];
    const fit = fitAlphaBeta(sends);
    expect(fit.alphaUs).toBe(0);
    expect(fit.bandwidthGBps).toBeGreaterThan(0);
    expect(fit.rmsError).toBeGreaterThan(0);
  });

  it('refuses points that cannot give a link, saying why', () => {
    const one = points({ alphaUs: 5, bandwidthGBps: 1 }, ['send', 'allReduce'], 2, [4096]);
    expect(() => fitAlphaBeta(one)).toThrow(/at least two sizes/);
    const flat: CalibrationPoint[] = [
      { op: 'send', ranks: 2, bytes: 1024, us: 100 },
      { op: 'send', ranks: 2, bytes: 1 << 20, us: 90 },
    ];
    expect(() => fitAlphaBeta(flat)).toThrow(/the times do not grow with the size/);
    const sends = points({ alphaUs: 20, bandwidthGBps: 2 }, ['send'], 2, [4096, 16 << 20]);
    const flatExchanges: CalibrationPoint[] = [
      { op: 'allToAll', ranks: 2, bytes: 4096, us: 25 },
      { op: 'allToAll', ranks: 2, bytes: 16 << 20, us: 18 },
    ];
    expect(() => fitAlphaBeta([...sends, ...flatExchanges])).toThrow(
      /the exchanges' times do not grow with the size, so no duplex bandwidth can be fitted/,
    );
    expect(() => fitAlphaBeta([{ ...flat[0], us: 0 }, flat[1]])).toThrow(/point 0 \(send\).*positive time/);
    expect(() => fitAlphaBeta([flat[0], { ...flat[1], ranks: 1 }])).toThrow(/point 1 .*2 or more ranks/);
    // A send of S and an allReduce of 2S on 2 ranks have the same alpha-to-bytes ratio.
    const tied: CalibrationPoint[] = [
      { op: 'send', ranks: 2, bytes: 1024, us: 10 },
      { op: 'allReduce', ranks: 2, bytes: 2048, us: 20 },
    ];
    expect(() => fitAlphaBeta(tied)).toThrow(/cannot tell latency from bandwidth/);
  });
});

describe('tensorcomm predict calibrate', () => {
  let errors: MockInstance<typeof console.error>;
  beforeEach(() => {
    errors = vi.spyOn(console, 'error').mockImplementation(() => {});
  });
  afterEach(() => errors.mockRestore());

  async function calibrate(...argv: string[]): Promise<{ code: number; lines: string[]; stderr: string }> {
    const lines: string[] = [];
    const code = await predictCommand(['calibrate', ...argv], (line) => lines.push(line));
    return { code, lines, stderr: errors.mock.calls.map((c) => c.join(' ')).join('\n') };
  }

  /** The written topology: two nodes whose links are alpha-beta with positive fitted values. */
  function expectCalibrated(file: string, ranksPerNode: number) {
    const topology = loadTopology(file);
    expect(topology).toMatchObject({ nodes: 2, gpusPerNode: ranksPerNode });
    const { intraNode, interNode } = topology.spec;
    expect(intraNode.kind).toBe('alpha-beta');
    expect(interNode?.kind).toBe('alpha-beta');
    for (const link of [intraNode, interNode!]) {
      expect(link.latencyUs).toBeGreaterThanOrEqual(0);
      expect(link.bandwidthGBps).toBeGreaterThan(0);
    }
  }

  it('--quick: times processes and two nodes over TCP, prints the fits, writes a YAML topology', async () => {
    const file = join(dir, 'machine.yaml');
    const { code, lines, stderr } = await calibrate('--quick', '--out', file);
    expect([code, stderr]).toEqual([0, '']);
    expectCalibrated(file, 8);
    expect(readFileSync(file, 'utf8')).toMatch(
      /^# tensorcomm predict calibrate, .*\n# intraNode from 2 processes/,
    );
    const header = lines.findIndex((l) =>
      /^#\s+link\s+measured on\s+alpha\(us\)\s+bandwidth\(GB\/s\)\s+duplex\(GB\/s\)\s+reduce\(GB\/s\)/.test(
        l,
      ),
    );
    // alpha, bandwidth, duplex, reduce (or 'free'), rms error.
    const fits = String.raw`\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(?:[\d.]+|free)\s+[\d.]+%$`;
    expect(lines[header + 1]).toMatch(
      new RegExp(String.raw`^ intraNode\s+2 processes \(file store rings\)${fits}`),
    );
    expect(lines[header + 2]).toMatch(new RegExp(String.raw`^ interNode\s+2 nodes over loopback TCP${fits}`));
    expect(lines.at(-1)).toBe(`# topology written to ${file}`);
  }, 60_000);

  it('--threads, --sizes, --rounds, --ranks-per-node: thread ranks inside a node, a JSON topology', async () => {
    const file = join(dir, 'threads.json');
    const { code, stderr, lines } = await calibrate(
      '--threads',
      '--sizes',
      // Far apart: thread ranks lend a send's buffer, so only the reductions' times grow much with size.
      '4K,16M',
      '--rounds',
      '2',
      '--ranks-per-node',
      '4',
      '--quick',
      '--out',
      file,
    );
    expect([code, stderr]).toEqual([0, '']);
    expectCalibrated(file, 4);
    expect(JSON.parse(readFileSync(file, 'utf8')).intraNode.kind).toBe('alpha-beta');
    expect(lines).toContain('# sizes 4096, 16777216 B, median of 2 batches each');
    expect(lines.some((l) => /^ intraNode\s+2 thread ranks \(memory store\)/.test(l))).toBe(true);
  }, 60_000);

  it('--help lists the options', async () => {
    const { code, lines } = await calibrate('--help');
    expect(code).toBe(0);
    expect(lines[0]).toMatch(/^usage: tensorcomm predict calibrate \[options\]\n/);
    for (const flag of ['--out', '--threads', '--sizes', '--rounds', '--ranks-per-node', '--quick'])
      expect(lines[0]).toContain(flag);
  });

  it('exit 2 for a bad command line, naming the flag, with the usage; nothing is measured', async () => {
    for (const [argv, message] of [
      [['--out', join(dir, 'topo.txt')], /--out: a topology file ends .yaml, .yml or .json/],
      [['--sizes', '4K'], /--sizes: two or more sizes/],
      [['--sizes', '4K,4096'], /--sizes: two or more sizes/],
      [['--sizes', '4K,1X'], /--sizes: expected a byte count like 4, 64K or 1M, got "1X"/],
      [['--sizes', '2,4K'], /--sizes: at least 4 bytes/],
      [['--rounds', '0'], /--rounds: expected an integer of at least 1, got "0"/],
      [['--ranks-per-node', '1'], /--ranks-per-node: expected an integer of at least 2, got "1"/],
      [['--bogus'], /Unknown option '--bogus'/],
      [['extra.yaml'], /Unexpected argument 'extra.yaml'/],
    ] as Array<[string[], RegExp]>) {
      errors.mockClear();
      const { code, lines, stderr } = await calibrate(...argv);
      expect([code, lines], argv.join(' ')).toEqual([2, []]);
      expect(stderr).toMatch(/^tensorcomm predict calibrate: /);
      expect(stderr).toMatch(message);
      expect(stderr).toMatch(/\n\nusage: tensorcomm predict calibrate \[options\]/);
    }
  });
});
