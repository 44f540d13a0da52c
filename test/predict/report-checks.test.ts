import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkPredictReport, readPredictReport } from '../../src/predict/report-checks.ts';
import { reportA } from './report-samples.ts';

const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-report-checks-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

type Fields = Record<string, unknown>;

/** reportA as JSON with one edit, checked under the name predict.json. */
function problemWith(edit: (report: Fields & { ranks: Fields[]; calls: Fields[] }) => void): string {
  const report = JSON.parse(JSON.stringify(reportA()));
  edit(report);
  try {
    checkPredictReport(report, 'predict.json');
  } catch (error) {
    expect(error).toBeInstanceOf(TypeError);
    return (error as Error).message;
  }
  throw new Error('the edited report passed');
}

describe('readPredictReport', () => {
  it('reads a report back as written', () => {
    const path = file('ok.json', JSON.stringify(reportA()));
    expect(readPredictReport(path)).toEqual(reportA());
  });

  it('ignores keys it does not know, and returns only its own', () => {
    const report = { ...reportA(), notes: 'later versions may add this' };
    report.calls[0] = { ...report.calls[0], tag: 7 } as (typeof report.calls)[0];
    expect(readPredictReport(file('extra.json', JSON.stringify(report)))).toEqual(reportA());
  });

  it('names the file when it cannot be read or is not JSON', () => {
    const missing = join(dir, 'missing.json');
    expect(() => readPredictReport(missing)).toThrow(`${missing}: cannot be read: ENOENT`);
    const broken = file('broken.json', '{"topology": ');
    expect(() => readPredictReport(broken)).toThrow(`${broken}: not JSON:`);
  });

  it('rejects a file that is not a report, saying what it found', () => {
    const trace = file('trace.json', JSON.stringify({ traceEvents: [], otherData: { tool: 'tensorcomm' } }));
    expect(() => readPredictReport(trace)).toThrow(
      `${trace}: not a predict report (expected an object with "topology", "ranks" and "calls"; found keys: traceEvents, otherData)`,
    );
    expect(() => readPredictReport(file('list.json', '[1, 2]'))).toThrow(
      /list\.json: not a predict report .*found an array\)$/,
    );
  });

  it('names the field and the value for a bad one', () => {
    expect(problemWith((r) => (r.calls[3].endUs = 'x'))).toBe(
      'predict.json: calls[3].endUs: expected a finite number, got "x"',
    );
    expect(problemWith((r) => delete r.calls[2].startUs)).toBe(
      'predict.json: calls[2].startUs: expected a finite number, got nothing',
    );
    expect(problemWith((r) => (r.ranks[1].waitUs = -1))).toBe(
      'predict.json: ranks[1].waitUs: expected a number >= 0, got -1',
    );
    expect(problemWith((r) => (r.calls[0].bytes = 1.5))).toBe(
      'predict.json: calls[0].bytes: expected an integer >= 0, got 1.5',
    );
    expect(problemWith((r) => (r.calls[6].peer = '1'))).toBe(
      'predict.json: calls[6].peer: expected an integer >= 0, got "1"',
    );
    expect(problemWith((r) => (r.calls[1].algorithm = null))).toBe(
      'predict.json: calls[1].algorithm: expected a string, got null',
    );
    expect(problemWith((r) => (r.topology = 3))).toBe('predict.json: topology: expected a string, got 3');
    expect(problemWith((r) => ((r as Fields).calls = {}))).toBe(
      'predict.json: calls: expected an array, got an object',
    );
    expect(problemWith((r) => ((r.ranks as unknown[])[0] = 3))).toBe(
      'predict.json: ranks[0]: expected an object, got 3',
    );
  });

  it('rejects a report that contradicts itself', () => {
    expect(problemWith((r) => (r.calls[4].endUs = 49))).toBe(
      'predict.json: calls[4].endUs: 49 is before startUs (50)',
    );
    expect(problemWith((r) => (r.ranks[1].rank = 0))).toBe(
      'predict.json: ranks[1].rank: rank 0 is listed twice',
    );
    expect(problemWith((r) => (r.calls[5].rank = 2))).toBe(
      'predict.json: calls[5].rank: rank 2 is not in ranks',
    );
    expect(problemWith((r) => (r.ranks = []))).toBe('predict.json: ranks: expected at least one rank');
  });
});
