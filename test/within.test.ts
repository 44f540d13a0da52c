/** within(): work without a timeout of its own (an esbuild build) gets one, and is told to stop when it passes. */
import { describe, expect, it } from 'vitest';
import { within } from '../src/runtime/within.ts';

describe('within', () => {
  it('rejects naming the work once the time passes, after telling it to give up', async () => {
    let stopped = 0;
    const hung = new Promise<never>(() => {});
    await expect(within(hung, 20, 'bundling the rank modules', () => stopped++)).rejects.toThrow(
      'bundling the rank modules took over 0.02 s',
    );
    expect(stopped).toBe(1);
  });

  it('passes the work’s own outcome through, and stops nothing', async () => {
    let stopped = 0;
    expect(await within(Promise.resolve(7), 1_000, 'x', () => stopped++)).toBe(7);
    await expect(within(Promise.reject(new Error('own')), 1_000, 'x', () => stopped++)).rejects.toThrow(
      'own',
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(stopped).toBe(0);
  });
});
