import { describe, expect, it } from 'vitest';
import { BenchPage, replaceBetweenMarkers } from '../bench/benchmarks-page.ts';
import { headlineMarkdown } from '../bench/headline.ts';

const MACHINE = {
  node: 'v24.22.3',
  arch: 'x64',
  cpus: 2,
  cpuModel: 'Test CPU',
  date: '2026-12-06T12:00:00Z',
};

function pageOf(parts: Record<string, string[]>, methods: Record<string, string>): string {
  const page = new BenchPage();
  const passedOn: string[] = [];
  const log = page.recorder((line) => passedOn.push(line));
  for (const [title, lines] of Object.entries(parts)) {
    page.begin(title);
    for (const line of lines) log(line);
  }
  expect(passedOn).toEqual(Object.values(parts).flat());
  return page.markdown(MACHINE, ['Open MPI 4.1.6', 'torch 2.6.0 (gloo)'], methods);
}

describe('the benchmarks page', () => {
  it('heads the page with the machine and versions, and puts each part under its method', () => {
    const md = pageOf(
      {
        'small calls': [
          '# 4 B calls beside Open MPI',
          '#  size  time(us)',
          '      4      1.25',
          '      8      1.30',
          '',
          '# small calls took 3.0 s',
        ],
        'start-up': ['#ranks  x', '     4  1.40'],
      },
      { 'small calls': 'Cold: a fresh job.', 'start-up': 'Medians of 5 jobs.' },
    );
    expect(md).toContain('on 2 × Test CPU (x64), Node v24.22.3');
    expect(md).toContain('Anchors: Open MPI 4.1.6; torch 2.6.0 (gloo).');
    expect(md).toContain(
      [
        '## small calls',
        '',
        'Cold: a fresh job.',
        '',
        '4 B calls beside Open MPI',
        '',
        '```text',
        '#  size  time(us)',
        '      4      1.25',
        '      8      1.30',
        '```',
        '',
        'small calls took 3.0 s',
        '',
        '## start-up',
        '',
        'Medians of 5 jobs.',
        '',
        '```text',
        '#ranks  x',
        '     4  1.40',
        '```',
      ].join('\n'),
    );
    expect(md.endsWith('```\n')).toBe(true);
  });

  it('refuses a part whose method nobody wrote', () => {
    expect(() => pageOf({ kernels: ['# x'] }, {})).toThrow('no method written for the part "kernels"');
  });

  it('writes between markers and keeps the rest', () => {
    const text = 'intro\n<!-- headline:start -->\nold\nrows\n<!-- headline:end -->\nafter\n';
    expect(replaceBetweenMarkers(text, 'headline', ['| a |', '| b |'])).toBe(
      'intro\n<!-- headline:start -->\n| a |\n| b |\n<!-- headline:end -->\nafter\n',
    );
    expect(() => replaceBetweenMarkers('no markers', 'headline', [])).toThrow('<!-- headline:start -->');
  });
});

describe('the README headline', () => {
  it('puts each figure beside its anchors from the same run, and leaves out what the run lacks', () => {
    const lines = headlineMarkdown({
      smallCalls: {
        rounds: [
          { allReduceUs: 1, rttUs: 2, mpiAllReduceUs: 0.5, mpiRttUs: 0.5 },
          { allReduceUs: 3, rttUs: 4, mpiAllReduceUs: 0.5, mpiRttUs: 1 },
          { allReduceUs: 2, rttUs: 3, mpiAllReduceUs: 0.5, mpiRttUs: 1 },
        ],
        allReduceRatio: 4,
        rttRatio: 3,
      },
      coldCalls: {
        node: 'v24',
        jobs: 3,
        spans: [
          { ranks: 2, op: 'roundTrip', bytes: 4, span: { from: 0, to: 1_000 }, tensorcommUs: 40 },
          {
            ranks: 2,
            op: 'roundTrip',
            bytes: 4,
            span: { from: 0, to: 3_000 },
            tensorcommUs: 30,
            mpiUs: 0.3,
            ratio: 100,
          },
        ],
      },
      processCalls: { node: 'v24', jobs: 3, spans: [], skipped: {} },
      goals: [],
      startup: [
        {
          worldSize: 64,
          entry: 'startup-rank.ts',
          floorMs: 400,
          firstMs: 600,
          coldMs: 500,
          warmMs: 50,
          peakRssBytes: 0,
        },
      ],
    });
    expect(lines).toEqual([
      '| figure | tensorcomm | anchors, same run | ratio |',
      '| --- | --- | --- | --- |',
      '| 4 B round trip, 2 thread ranks, warm | 3.00 µs | Open MPI 1.00 µs | 3.00× Open MPI |',
      '| 4 B allReduce, 2 thread ranks, warm | 2.00 µs | Open MPI 0.50 µs | 4.00× Open MPI |',
      "| 4 B round trip, 2 thread ranks, a fresh job's first 3,000 (cold) | 30.00 µs | Open MPI 0.30 µs | 100.00× Open MPI |",
      "| start-up of 64 thread ranks, a process's first job | 600 ms | 64 bare Workers 400 ms | 1.50× bare Workers |",
    ]);
  });
});
