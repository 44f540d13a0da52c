/**
 * firstMappingPerLine: a source map cut to one mapping per generated line
 * still maps every line to the file and line it came from, checked against
 * Node's own source map reader on a map esbuild made.
 */
import { SourceMap } from 'node:module';
import { transform } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { firstMappingPerLine } from '../src/launch/line-source-map.ts';

/** Some TypeScript with many tokens per line, names, and lines that map nowhere. */
const SOURCE = Array.from(
  { length: 40 },
  (_, i) =>
    `export function f${i}(a: number, b: { c: number }): number { const d = a * ${i} + b.c; return d > 3 ? f${i}(d - 1, b) : d; }`,
).join('\n\n');

async function esbuildMap(): Promise<{ mappings: string; [key: string]: unknown }> {
  const { map } = await transform(SOURCE, { loader: 'ts', sourcemap: 'external', sourcefile: 'lines.ts' });
  return JSON.parse(map);
}

describe('firstMappingPerLine', () => {
  it('keeps one mapping per line, each to the file and line the whole line came from', async () => {
    const full = await esbuildMap();
    const cut = { ...full, mappings: firstMappingPerLine(full.mappings) };
    const lines = full.mappings.split(';');
    // The test means something only where lines held several mappings.
    expect(lines.filter((line) => line.split(',').length > 3).length).toBeGreaterThan(30);
    const cutLines = cut.mappings.split(';');
    expect(cutLines.length).toBe(lines.length);
    expect(cutLines.every((line) => !line.includes(','))).toBe(true);
    const before = new SourceMap(full as never);
    const after = new SourceMap(cut as never);
    let mapped = 0;
    for (const [line, segments] of lines.entries()) {
      expect(cutLines[line] === '').toBe(segments === '');
      if (segments === '') continue;
      // The cut line's one entry, found from the far end of the line.
      const kept = after.findEntry(line, 10_000) as { generatedLine: number; generatedColumn: number };
      expect(kept.generatedLine).toBe(line);
      const original = before.findEntry(line, kept.generatedColumn);
      expect(kept).toEqual(original);
      // Every mapping of the line in the full map names the same file and line.
      for (let column = kept.generatedColumn; column < 200; column += 7) {
        const entry = before.findEntry(line, column) as { originalSource: string; originalLine: number };
        expect([entry.originalSource, entry.originalLine]).toEqual([
          (original as { originalSource: string }).originalSource,
          (original as { originalLine: number }).originalLine,
        ]);
      }
      mapped++;
    }
    // esbuild lays each function out over several lines, all of which must map.
    expect(mapped).toBeGreaterThanOrEqual(40);
  });

  it('round-trips numbers of every size and sign, and refuses what is not VLQ', () => {
    // One segment a line: cutting changes nothing, so large and negative deltas must survive encoding.
    const mappings = 'AAAA;AAgCA;AA+/hHA;AAAAA;AACA';
    expect(firstMappingPerLine(mappings)).toBe(mappings);
    expect(firstMappingPerLine('AAAA,CAAC;;ACAA,EAAE')).toBe('AAAA;;ACAC');
    expect(() => firstMappingPerLine('AA*A')).toThrow(/'\*' is not a Base64 VLQ digit/);
    expect(() => firstMappingPerLine('AAg')).toThrow(/ends inside a number/);
  });
});
