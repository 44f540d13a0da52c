import { beforeAll, describe, expect, it } from 'vitest';
import { spawnThreads } from '../src/index.ts';
import type { scenarios } from './fixtures/groups.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/groups.ts', import.meta.url));
const ranks = (worldSize: number) => (entry: URL, args: object) => spawnThreads(entry, { worldSize, args });

/** The scenarios of each world size run in one job, one after the other on the same ranks; leak has its own. */
let four: Awaited<ReturnType<typeof runFour>>;
let three: Awaited<ReturnType<typeof runThree>>;
const runFour = () => fixture.runSteps(['subgroups', 'manager', 'tags'], ranks(4));
const runThree = () => fixture.runSteps(['async', 'objects'], ranks(3));
/** A hook that runs one job of several scenarios gets the time of the tests it stands for (60 s each by default). */
const SHARED_JOB_MS = 120_000;
beforeAll(async () => {
  four = await runFour();
}, SHARED_JOB_MS);
beforeAll(async () => {
  three = await runThree();
}, SHARED_JOB_MS);

describe('groups', () => {
  it('overlapping subgroups run at once; non-members get a clear error', () => {
    const res = four.subgroups;
    expect(res[0].a).toEqual([0, 3, 6, 6, 6]);
    expect(res[1].a).toEqual([1, 3, 6, 6, 6]);
    expect(res[1].b).toEqual([0, 90, 90, 90]);
    expect(res[3].b).toEqual([2, 90, 90, 90]);
    expect(res[0].b).toBeNull();
    expect(res[0].notMember).toMatch(
      /barrier on group "group\[1,2,3\]": rank 0 is not a member \(members: 1, 2, 3\)/,
    );
    expect(res[3].notMember).toMatch(/rank 3 is not a member \(members: 0, 1, 2\)/);
  });

  it('the manager shares one group per device combination and destroys in sorted order', () => {
    const res = four.manager;
    const sorted = ['0@cpu,1@cpu', '0@cpu,1@cpu,2@cpu,3@cpu', '0@cpu,2@cpu', '1@cpu,3@cpu'];
    for (const r of res) {
      expect(r.same).toBe(true);
      expect(r.keys).toEqual(sorted);
      expect(r.order).toEqual(sorted);
      expect(r.last).toEqual(sorted);
      expect(r.afterDestroy).toMatch(/the group was destroyed/);
    }
    expect(res[0].sum).toEqual([2, 2]);
    expect(res[1].sum).toEqual([1, 1]);
  });
});

describe('Work handles', () => {
  it('many outstanding allReduces complete correctly; then() chains Works', () => {
    const res = three.async;
    for (const r of res) {
      // Every Work done at once held its result; the rest were pending.
      expect(r.settledAtStart + r.pendingAtStart).toBe(50);
      expect(r.allDone).toBe(true);
      expect(r.firsts).toEqual(Array.from({ length: 50 }, (_, i) => 3 * i + 3));
      expect(r.chained).toEqual([9]);
    }
  });
});

describe('object and point-to-point calls', () => {
  it('allGatherObject, broadcastObject, sendObject/recvObject carry structured clones', () => {
    const res = three.objects;
    for (const r of res) {
      expect(r.ranks).toEqual([0, 1, 2]);
      expect(r.maps).toEqual([
        [0, 'v'],
        [1, 'v'],
        [2, 'v'],
      ]);
      expect(r.sizes).toEqual([5000, 10000, 15000]);
      expect(r.date).toBe(true);
      expect(r.broadcasted).toEqual({ from: 'rank-1', list: [1, 2, 3] });
      expect(r.unclonable).toMatch(/sendObject: the object cannot be structured-cloned/);
    }
    expect(res[1].received).toEqual({ hello: 'from 0', bytes: new Uint8Array([1, 2, 3]) });
  });

  it('tags keep streams apart and batchIsendIrecv runs a ring without deadlock', () => {
    const res = four.tags;
    expect(res[1].got).toEqual([2, 2, 1, 1]);
    expect(res.map((r) => r.ring)).toEqual([
      [3, 3, 3],
      [0, 0, 0],
      [1, 1, 1],
      [2, 2, 2],
    ]);
  });

  it('10,000 small collectives (after 10,000 more) leave no slots, buffers or memory behind', async () => {
    const res = await fixture.run('leak', ranks(2));
    for (const r of res) {
      expect(r.slotsInUse).toBe(0);
      expect(r.heldPeerBuffers).toBe(0);
      // 50 bytes a call would show.
      expect(r.heapGrowth).toBeLessThan(512 << 10);
      expect(r.arrayBufferGrowth).toBeLessThan(1 << 20);
    }
  });
});
