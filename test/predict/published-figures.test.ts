/**
 * The model against published nccl-tests figures (test/predict/published-figures.ts; the table is in
 * docs/guides/prediction.md). The error is the predicted time over the time the figure implies at
 * that size, minus one: a busbw of B GB/s for S bytes implies S / algbw. The goal: within
 * 15% from 64 MiB, within 30% from 1 to 64 MiB.
 */
import { describe, expect, it } from 'vitest';
import { predictCollective } from '../../src/index.ts';
import { PUBLISHED_FIGURES, type PublishedFigure } from './published-figures.ts';

const MiB = 2 ** 20;

function error(figure: PublishedFigure): number {
  const { op, bytes, ranks, topology } = figure;
  const predicted = predictCollective({ op, bytes, ranks, topology });
  // Same size, same busbw factor: the times' ratio is the inverse of the busbws'.
  return (figure.busbwGBps * (figure.nics ?? 1)) / predicted.busbwGBps - 1;
}

const band = (bytes: number) => (bytes >= 64 * MiB ? 0.15 : 0.3);
const label = (f: PublishedFigure) => `${f.source}: ${f.setup} at ${f.bytes} B`;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

describe('against published figures', () => {
  it('every figure of full preset machines is within the goal', () => {
    const goal = PUBLISHED_FIGURES.filter((f) => f.goal);
    expect(goal.length).toBeGreaterThan(15);
    for (const figure of goal) {
      expect(figure.bytes, label(figure)).toBeGreaterThanOrEqual(MiB);
      expect(Math.abs(error(figure)), label(figure)).toBeLessThanOrEqual(band(figure.bytes));
    }
  });

  it('figures of partial or troubled machines: within 50% each, the goal on the median of each size band', () => {
    const others = PUBLISHED_FIGURES.filter((f) => !f.goal);
    for (const figure of others) expect(Math.abs(error(figure)), label(figure)).toBeLessThanOrEqual(0.5);
    for (const large of [true, false]) {
      const inBand = others.filter((f) => f.bytes >= 64 * MiB === large);
      expect(median(inBand.map((f) => Math.abs(error(f))))).toBeLessThanOrEqual(large ? 0.15 : 0.3);
    }
  });
});
