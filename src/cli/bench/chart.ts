/**
 * The collectives bench as an SVG chart: busbw against message size (log
 * scale), one line per op and world size. Plain SVG text, no dependencies,
 * so any browser opens it.
 */
import type { CollectiveRow } from './collectives.ts';

const WIDTH = 800;
const HEIGHT = 480;
const MARGIN = { left: 70, right: 190, top: 40, bottom: 60 };
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];

function sizeLabel(bytes: number): string {
  if (bytes >= 1 << 30) return `${bytes / (1 << 30)}G`;
  if (bytes >= 1 << 20) return `${bytes / (1 << 20)}M`;
  if (bytes >= 1 << 10) return `${bytes / (1 << 10)}K`;
  return `${bytes}`;
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]!);
}

/** A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least `value`. */
function niceCeiling(value: number): number {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= value)!;
}

export function busbwChart(rows: readonly CollectiveRow[], title = 'tensorcomm collectives: busbw'): string {
  if (rows.length === 0) throw new RangeError('busbwChart: no rows to draw');
  const series = new Map<string, CollectiveRow[]>();
  for (const row of rows) {
    const name = `${row.op}, ${row.worldSize} ranks`;
    series.set(name, [...(series.get(name) ?? []), row]);
  }
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const logs = rows.map((r) => Math.log2(r.bytes));
  const [minX, maxX] = [Math.min(...logs), Math.max(...logs)];
  const maxY = niceCeiling(Math.max(...rows.map((r) => r.busbw)));
  const x = (bytes: number) =>
    MARGIN.left + (maxX === minX ? plotW / 2 : ((Math.log2(bytes) - minX) / (maxX - minX)) * plotW);
  const y = (busbw: number) => MARGIN.top + plotH - (busbw / maxY) * plotH;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${MARGIN.left}" y="24" font-size="15">${escapeXml(title)}</text>`,
    `<line x1="${MARGIN.left}" y1="${MARGIN.top + plotH}" x2="${MARGIN.left + plotW}" y2="${MARGIN.top + plotH}" stroke="black"/>`,
    `<line x1="${MARGIN.left}" y1="${MARGIN.top}" x2="${MARGIN.left}" y2="${MARGIN.top + plotH}" stroke="black"/>`,
  ];
  for (const bytes of [...new Set(rows.map((r) => r.bytes))].sort((a, b) => a - b)) {
    parts.push(
      `<text x="${x(bytes).toFixed(1)}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${sizeLabel(bytes)}</text>`,
    );
  }
  for (let i = 0; i <= 5; i++) {
    const v = (maxY * i) / 5;
    const ty = y(v).toFixed(1);
    parts.push(
      `<line x1="${MARGIN.left}" y1="${ty}" x2="${MARGIN.left + plotW}" y2="${ty}" stroke="#ddd"/>`,
      `<text x="${MARGIN.left - 6}" y="${ty}" text-anchor="end" dominant-baseline="middle">${Number(v.toPrecision(3))}</text>`,
    );
  }
  parts.push(
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 16}" text-anchor="middle">message size (bytes, log scale)</text>`,
    `<text transform="translate(18 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">busbw (GB/s)</text>`,
  );
  [...series.entries()].forEach(([name, points], i) => {
    const color = COLORS[i % COLORS.length];
    const sorted = [...points].sort((a, b) => a.bytes - b.bytes);
    const path = sorted.map((p) => `${x(p.bytes).toFixed(1)},${y(p.busbw).toFixed(1)}`).join(' ');
    parts.push(
      `<polyline class="series" data-name="${escapeXml(name)}" fill="none" stroke="${color}" stroke-width="2" points="${path}"/>`,
    );
    const ly = MARGIN.top + 10 + i * 18;
    const lx = MARGIN.left + plotW + 16;
    parts.push(
      `<line x1="${lx}" y1="${ly}" x2="${lx + 20}" y2="${ly}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${lx + 26}" y="${ly}" dominant-baseline="middle">${escapeXml(name)}</text>`,
    );
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
