import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest';
import { predictCommand } from '../../src/cli/predict.ts';
import { reportA, reportB } from './report-samples.ts';

const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-cli-predict-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const a = join(dir, 'a.json');
const b = join(dir, 'b.json');
writeFileSync(a, JSON.stringify(reportA()));
writeFileSync(b, JSON.stringify(reportB()));

let errors: MockInstance<typeof console.error>;
beforeEach(() => {
  errors = vi.spyOn(console, 'error').mockImplementation(() => {});
});
afterEach(() => errors.mockRestore());

/** The command's exit code, what it logged, and what it wrote to stderr. */
async function predict(...argv: string[]): Promise<{ code: number; lines: string[]; stderr: string }> {
  const lines: string[] = [];
  const code = await predictCommand(argv, (line) => lines.push(line));
  return { code, lines, stderr: errors.mock.calls.map((c) => c.join(' ')).join('\n') };
}

describe('tensorcomm predict', () => {
  it('show: calls per (group, op, size) in nccl-tests layout, then per rank, then the job end', async () => {
    const { code, lines, stderr } = await predict('show', a);
    expect([code, stderr]).toEqual([0, '']);
    expect(lines).toEqual([
      `# ${a}: predicted on test-a: 2 ranks, 10 calls (a collective counts once per rank)`,
      '#    group              op     size(B)   calls  algorithm  protocol    time(us)  algbw(GB/s)  busbw(GB/s)',
      '     world       allReduce      500000       2       ring     LL128       10.00        50.00        50.00',
      '     world       allReduce     1000000       4       ring    Simple       20.00        50.00        50.00',
      '     world       allGather        4000       2       ring        LL        4.00         1.00         0.50',
      '     world            send        2000       1        p2p    Simple        2.00         1.00         1.00',
      '     world            recv        2000       1        p2p    Simple        2.00         1.00         1.00',
      '',
      '# per rank: overlapped = comm - exposed (hidden behind compute), wait = for stragglers',
      '# rank      end(us)  compute(us)     comm(us)  exposed(us)  overlapped(us)     wait(us)',
      '     0       100.00        60.00        56.00        30.00           26.00         4.00',
      '     1       110.00        70.00        56.00        36.00           20.00         0.00',
      '',
      '# predicted end: 110.00 us (rank 1)',
    ]);
  });

  it('diff: per op and per rank a vs b with b/a, the calls only in one, the job end', async () => {
    const { code, lines, stderr } = await predict('diff', a, b);
    expect([code, stderr]).toEqual([0, '']);
    expect(lines).toEqual([
      `# a: ${a}, predicted on test-a: 2 ranks, 10 calls`,
      `# b: ${b}, predicted on test-b: 2 ranks, 10 calls`,
      '# 8 calls in both (matched by rank, group, seq, op); b/a below 1: b is faster',
      '#             op   calls   a_total(us)   b_total(us)     b/a',
      '       allReduce       6        100.00         50.00   0.500',
      '       allGather       2          8.00         16.00   2.000',
      '',
      '# rank     a_end(us)     b_end(us)     b/a',
      '     0        100.00         80.00   0.800',
      '     1        110.00         88.00   0.800',
      '',
      `# 2 calls only in ${a}:`,
      '#   rank 0 world seq 0 send 2000 B peer 1',
      '#   rank 1 world seq 0 recv 2000 B peer 0',
      `# 2 calls only in ${b}:`,
      '#   rank 0 world seq 4 barrier 0 B',
      '#   rank 1 world seq 4 barrier 0 B',
      '# predicted end: a 110.00 us, b 88.00 us, b/a 0.800',
    ]);
  });

  it('diff lists ten unmatched calls and counts the rest', async () => {
    const many = reportA();
    for (let seq = 10; seq < 22; seq++) {
      many.calls.push({ ...many.calls[0], seq, startUs: 90, endUs: 91 });
    }
    const file = join(dir, 'many.json');
    writeFileSync(file, JSON.stringify(many));
    const { code, lines } = await predict('diff', file, a);
    expect(code).toBe(0);
    const only = lines.indexOf(`# 12 calls only in ${file}:`);
    expect(lines[only + 10]).toBe('#   rank 0 world seq 19 allReduce 1000000 B');
    expect(lines[only + 11]).toBe('#   ... and 2 more');
  });

  it('--help: the commands; <command> --help: that command', async () => {
    const top = await predict('--help');
    expect(top.code).toBe(0);
    expect(top.lines[0]).toMatch(/^usage: tensorcomm predict <command>/);
    expect(top.lines[0]).toMatch(/\n {2}show <report\.json> +per kind of call/);
    expect(top.lines[0]).toMatch(/\n {2}diff <a\.json> <b\.json> +two reports call by call/);
    const show = await predict('show', '--help');
    expect(show.code).toBe(0);
    expect(show.lines[0]).toMatch(/^usage: tensorcomm predict show <report\.json>\n/);
  });

  it('exit 2 for a missing or unknown command or a wrong number of files, with the usage', async () => {
    expect(await predict()).toMatchObject({ code: 2, lines: [] });
    expect(errors).toHaveBeenLastCalledWith(
      expect.stringMatching(/^tensorcomm predict: expected a command\n\nusage:/),
    );
    expect((await predict('calibrat')).code).toBe(2);
    expect(errors).toHaveBeenLastCalledWith(
      expect.stringMatching(/^tensorcomm predict: unknown command "calibrat"/),
    );
    expect((await predict('show')).code).toBe(2);
    expect(errors).toHaveBeenLastCalledWith(
      expect.stringMatching(
        /^tensorcomm predict show: expected 1 report file, got 0\n\nusage: tensorcomm predict show/,
      ),
    );
    expect((await predict('diff', a)).code).toBe(2);
    expect(errors).toHaveBeenLastCalledWith(
      expect.stringMatching(/^tensorcomm predict diff: expected 2 report files, got 1/),
    );
  });

  it('exit 1 for a bad report or two reports with nothing in common, saying why', async () => {
    const bad = join(dir, 'bad.json');
    const report = reportA();
    (report.calls[3] as { endUs: unknown }).endUs = 'soon';
    writeFileSync(bad, JSON.stringify(report));
    expect(await predict('show', bad)).toMatchObject({
      code: 1,
      lines: [],
      stderr: `tensorcomm predict show: ${bad}: calls[3].endUs: expected a finite number, got "soon"`,
    });
    errors.mockClear();
    const other = join(dir, 'other.json');
    writeFileSync(
      other,
      JSON.stringify({
        ...reportB(),
        calls: reportB().calls.map((c) => ({ ...c, rank: 1 - c.rank, seq: c.seq + 100 })),
      }),
    );
    const { code, stderr } = await predict('diff', a, other);
    expect(code).toBe(1);
    expect(stderr).toBe(
      `tensorcomm predict diff: ${a} and ${other} have no call in common (calls match by rank, group, seq and op): ` +
        `${a} has 10 calls on test-a, ${other} 10 on test-b`,
    );
    errors.mockClear();
    expect((await predict('diff', a, join(dir, 'missing.json'))).code).toBe(1);
  });
});
