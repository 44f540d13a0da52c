/**
 * ProducerArenas' admission of a region (what lending a value read in place
 * may take, ring-channels.ts): a region that would allocate pages in the file
 * system is taken only when `admits` allows that growth, and a refusal
 * leaves the arena as it was.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ProducerArenas } from '../src/file-store/producer-arenas.ts';
import { storeJobs } from './fixtures/store-jobs.ts';

const { newJob } = storeJobs('arenas');
const PAGE = 4096;
const made: ProducerArenas[] = [];
afterEach(() => {
  for (const arenas of made.splice(0)) arenas.close();
});

function arenas(): ProducerArenas {
  const a = new ProducerArenas(newJob(), 0, 1, { arenaBytes: 16 * PAGE, maxArenaBytes: 64 * PAGE });
  made.push(a);
  return a;
}

const bytes = (pages: number, fill: number) => new Uint8Array(pages * PAGE).fill(fill);

describe('ProducerArenas.store with admits', () => {
  it('asks for exactly the pages a region adds to the file system, and none for pages already allocated', () => {
    const a = arenas();
    const asked: number[] = [];
    const admits = (growth: number) => {
      asked.push(growth);
      return true;
    };
    const first = a.store(bytes(2, 1), 'test', admits);
    expect(first).toEqual({ index: 0, offset: 0 });
    // A part page counts whole: regions start on page boundaries.
    const second = a.store(new Uint8Array(PAGE + 1), 'test', admits);
    expect(second).toEqual({ index: 0, offset: 2 * PAGE });
    expect(a.reservedBytes).toBe(4 * PAGE);
    a.free(first!);
    // The freed region's pages stay allocated: reusing them grows nothing, so admits is not asked.
    expect(a.store(bytes(2, 3), 'test', admits)).toEqual({ index: 0, offset: 0 });
    expect(asked).toEqual([2 * PAGE, 2 * PAGE]);
  });

  it('refuses a region when admits refuses its growth, leaving the region free and nothing reserved', () => {
    const a = arenas();
    // No arena yet: the first one is not even made.
    expect(a.store(bytes(3, 1), 'test', () => false)).toBeUndefined();
    expect(a.reservedBytes).toBe(0);
    const kept = a.store(bytes(1, 2), 'test');
    expect(kept).toEqual({ index: 0, offset: 0 });
    expect(a.store(bytes(4, 3), 'test', (growth) => growth <= PAGE)).toBeUndefined();
    expect(a.reservedBytes).toBe(PAGE);
    // The refused region was given back: the next value takes the same place.
    expect(a.store(bytes(4, 4), 'test')).toEqual({ index: 0, offset: PAGE });
    expect(a.reservedBytes).toBe(5 * PAGE);
  });
});
