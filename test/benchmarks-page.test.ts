import { describe, expect, it } from 'vitest';
import { BenchPage, replaceBetweenMarkers } from '../bench/benchmarks-page.ts';

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
