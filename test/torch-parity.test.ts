/**
 * torch.distributed parity (docs/guides/threads.md, "Coming from
 * torch.distributed"): cases ported from PyTorch's own tests, and the calls
 * added for parity, on ranks as threads and as processes. Scenarios that leave
 * the job usable share one job per medium, in order; the one in which ranks
 * leave comes last.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchProcesses, spawnThreads } from '../src/index.ts';
import { expectAllFailed, type Failed } from './fixtures/expect-all-failed.ts';
import { type Outcome, type Step, scenarioFixture } from './fixtures/scenarios.ts';
import type { scenarios } from './fixtures/torch-parity.ts';

type S = typeof scenarios;
const fixture = scenarioFixture<S>(new URL('./fixtures/torch-parity.ts', import.meta.url));
const TIMEOUT_MS = 30_000;
/** A late rank's monitoredBarrier timeout: long enough for a loaded machine's ranks to arrive on time. */
const MONITOR_MS = 1_500;

const threads =
  (worldSize: number, checks = true) =>
  (entry: URL, args: object) =>
    spawnThreads(entry, { worldSize, args, collectiveTimeoutMs: TIMEOUT_MS, debug: { checks } });
/** Where the processes' hang reports go (a monitoredBarrier timeout writes one), removed after the file. */
const reports = mkdtempSync(join(tmpdir(), 'tensorcomm-torch-parity-'));
afterAll(() => rmSync(reports, { recursive: true, force: true }));
const processes = (nproc: number) => (entry: URL, args: object) =>
  launchProcesses(entry, {
    nproc,
    args,
    collectiveTimeoutMs: TIMEOUT_MS,
    output: () => {},
    debug: { hangReportDir: reports },
  });

const late = (ranks: number[], waitAllRanks = false) =>
  ({
    scenario: 'monitoredBarrierFails',
    args: { late: ranks, waitAllRanks, timeoutMs: MONITOR_MS },
    key: `late${ranks.join('')}`,
  }) as const;

const common = [
  'barrierImpliesWait',
  'barrierAfterSend',
  'unevenReduceScatter',
  'premulSum',
  'monitoredBarrierPasses',
  late([1]),
  'monitoredBarrierMismatch',
  'objects',
  'recvAnySource',
  'recvAnyOrder',
  'argumentChecks',
  'newSubgroups',
  'splitGroup',
] as const satisfies readonly Step<S>[];
const threadSteps = [...common, 'groupRanks', late([1, 2], true), 'monitoredBarrierAlone'] as const;
const processSteps = [...common, 'monitoredBarrierAlone'] as const;

type Results = Awaited<ReturnType<typeof runThreads>>;
const runThreads = () => fixture.runSteps(threadSteps, threads(4));
const runProcesses = () => fixture.runSteps(processSteps, processes(4));
const SHARED_JOB_MS = 240_000;

let onThreads: Results;
let onProcesses: Awaited<ReturnType<typeof runProcesses>>;
let checksOff: Awaited<ReturnType<typeof runChecksOff>>;
let single: Awaited<ReturnType<typeof runSingle>>;
const runChecksOff = () =>
  fixture.runSteps(['barrierImpliesWait', 'unevenReduceScatter', 'premulSum'], threads(3, false));
const runSingle = () => fixture.run('single', threads(1));

beforeAll(async () => {
  onThreads = await runThreads();
  checksOff = await runChecksOff();
  single = await runSingle();
}, SHARED_JOB_MS);
beforeAll(async () => {
  onProcesses = await runProcesses();
}, SHARED_JOB_MS);

const failed = (o: unknown) => o as Failed;
const ranksOf = (n: number) => Array.from({ length: n }, (_, r) => r);
/** The fixture's inputs: rank r's i-th value of a list (salt shifts it). */
const value = (r: number, i: number, salt = 0) => ((r + i + salt) % 5) - 2;

describe.each(['threads', 'processes'] as const)('on %s', (medium) => {
  const results = () => (medium === 'threads' ? onThreads : onProcesses);

  it('a barrier implies the earlier calls completed (test_barrier_implies_wait)', () => {
    for (const { doneAtBarrier, seen } of results().barrierImpliesWait) {
      expect(doneAtBarrier).toEqual(Array(16).fill(true));
      expect(seen).toEqual(Array.from({ length: 16 }, (_, i) => [4 * i, 4 * i]));
    }
    // A send whose receive comes after the receiver's barrier does not hold the barrier.
    for (const [r, received] of results().barrierAfterSend.entries()) {
      expect(received).toEqual(Array(3).fill((r + 3) % 4));
    }
  });

  it('reduceScatter takes inputs of a different size per rank (test_reduce_scatter)', () => {
    checkUneven(results().unevenReduceScatter, 4);
  });

  it('premulSum multiplies each rank by its own factor, then sums, on every reducing call', () => {
    checkPremul(results().premulSum, 4);
  });

  it('monitoredBarrier passes after work, and names the rank that did not arrive', () => {
    expect(results().monitoredBarrierPasses).toEqual(Array(4).fill('passed'));
    checkLateOne(results().late1);
  });

  it('monitoredBarrier: a rank that made another call is a mismatch, which the others hear from rank 0', () => {
    const [root, other, ...rest] = results().monitoredBarrierMismatch.map(failed);
    expect(root).toMatchObject({ ok: false, name: 'CollectiveMismatchError' });
    expect(root.message).toMatch(/called monitoredBarrier\(\) as call #\d+ .* but rank 1 called barrier\(\)/);
    expect(other).toMatchObject({ ok: false, name: 'CollectiveMismatchError' });
    expect(other.message).toMatch(/rank 1 called barrier\(\) .* but rank 0 called monitoredBarrier\(\)/);
    for (const o of rest) {
      expect(o).toMatchObject({ ok: false, name: 'CollectiveMismatchError' });
      expect(o.message).toMatch(/arrived, but group rank 0 reports: .*rank 1 called barrier\(\)/);
    }
    for (const o of [root, other, ...rest]) expect(o.ms).toBeLessThan(5_000);
  });

  it('gatherObject and scatterObject move objects of any size; bad lists fail every rank', () => {
    checkObjects(results().objects, 4);
  });

  it('recvFromAny receives from whichever rank sends (test_send_recv_any_source)', () => {
    const all = results().recvAnySource;
    for (const { mismatched } of all) expect(mismatched).toEqual([]);
    // Each rank heard from every other rank twice.
    for (const [r, { senders }] of all.entries()) {
      expect([...senders].sort()).toEqual(
        ranksOf(4)
          .filter((p) => p !== r)
          .flatMap((p) => [p, p]),
      );
    }
  });

  it('recvFromAny and later receives match messages in order; tags apart; group ranks; sizes checked', () => {
    checkAnyOrder(results().recvAnyOrder);
  });

  it("torch's argument checks fail every rank, naming the culprit", () => {
    checkArguments(results().argumentChecks, 4);
  });

  it('newSubgroups and splitGroup', () => {
    checkSubgroups(results().newSubgroups);
    checkSplit(results().splitGroup);
  });

  it('monitoredBarrier with waitAllRanks names every rank that never came (test_monitored_barrier_wait_all_ranks)', () => {
    const [root, ...others] = results().monitoredBarrierAlone;
    expect(others).toEqual(['left', 'left', 'left']);
    const f = failed(root);
    expect(f).toMatchObject({ ok: false, name: 'CommTimeoutError' });
    expect(f.message).toMatch(/: ranks 1, 2, 3 failed to pass monitoredBarrier within 2000 ms/);
  });
});

describe('on threads only', () => {
  it('get_group_rank / get_global_rank, on members and non-members', () => {
    for (const r of onThreads.groupRanks) {
      expect(r.world).toBe(true);
      // Group [3, 1] is sorted: group rank 0 is global rank 1.
      expect(r.groupRanks.slice(0, 2)).toEqual([{ value: 0 }, { value: 1 }]);
      expect(r.groupRanks[2]).toEqual({
        name: 'RangeError',
        message: 'groupRank: global rank 0 is not a member of group "group[1,3]" (members: 1, 3)',
      });
      expect(r.globalRanks.slice(0, 2)).toEqual([{ value: 1 }, { value: 3 }]);
      expect(r.globalRanks[2]).toEqual({
        name: 'RangeError',
        message: 'globalRank: group rank 2 is not a rank of group "group[1,3]" (size 2)',
      });
    }
  });

  it('monitoredBarrier with waitAllRanks names every late rank', () => {
    const [root, one, two, three] = onThreads.late12.map((r) => r.seen);
    expect(root).toMatchObject({ ok: false, name: 'CommTimeoutError' });
    expect(failed(root).message).toMatch(/: ranks 1, 2 failed to pass monitoredBarrier within 1500 ms$/);
    expect(failed(three).message).toMatch(/rank 3 arrived, but group rank 0 reports: .*ranks 1, 2 failed/);
    for (const o of [one, two])
      expect(failed(o).message).toMatch(/ranks 1, 2 failed to pass monitoredBarrier/);
    for (const r of onThreads.late12) expect(r.after).toEqual([4, 4]);
  });

  it('with the fingerprint checks off: uneven reduceScatter, premulSum, barrier', () => {
    checkUneven(checksOff.unevenReduceScatter, 3);
    checkPremul(checksOff.premulSum, 3);
    for (const { doneAtBarrier } of checksOff.barrierImpliesWait)
      expect(doneAtBarrier).toEqual(Array(16).fill(true));
  });

  it('on one rank every new call completes at once', () => {
    const [r] = single;
    expect(r.premul).toEqual([6, 6, 6]);
    expect(r.gathered).toEqual([{ a: 1 }]);
    expect(r.scattered).toEqual({ b: 2 });
    expect(r.subgroups).toEqual([[0]]);
    expect(failed(r.any)).toMatchObject({
      name: 'RangeError',
      message: expect.stringMatching(/no other rank/),
    });
  });
});

function checkUneven(results: Results['unevenReduceScatter'], n: number): void {
  const total = (n * (n + 1)) / 2;
  for (const [r, res] of results.entries()) {
    const k = Array.from({ length: r }, (_, i) => i + 1);
    expect(res.sum).toEqual(k.map((v) => v * total));
    expect(res.max).toEqual(k.map((v) => v * n));
    expect(res.premul).toEqual(k.map((v) => (v * total) / 2));
  }
  const shapes = ranksOf(n)
    .map((i) => `[${i}]`)
    .join(',');
  expectAllFailed(
    results.map((res) => res.mismatch),
    new RegExp(`reduceScatter\\(float32\\[${escapeBrackets(shapes)}\\], sum\\)`),
    'CollectiveMismatchError',
  );
}

function escapeBrackets(text: string): string {
  return text.replace(/[[\]]/g, '\\$&');
}

function checkPremul(results: Results['premulSum'], n: number): void {
  const ranks = ranksOf(n);
  const premul = (count: number, at: (q: number, i: number) => number) =>
    Array.from({ length: count }, (_, i) => ranks.reduce((sum, q) => sum + (q + 1) * at(q, i), 0));
  for (const [r, { out }] of results.entries()) {
    for (const dtype of ['float32', 'float64', 'bfloat16', 'float16']) {
      const small = premul(5, (q, i) => value(q, i));
      expect(out[`allReduce/${dtype}/5`], dtype).toEqual(small);
      if (out[`allReduce/${dtype}/40000`]) expect(out[`allReduce/${dtype}/40000`], dtype).toEqual(small);
      // Only the root's tensor holds the result; the others keep theirs.
      const own = Array.from({ length: 5 }, (_, i) => value(r, i));
      expect(out[`reduce/${dtype}`], dtype).toEqual(r === n - 1 ? small : own);
      expect(out[`reduceScatter/${dtype}`], dtype).toEqual(premul(2, (q, i) => value(q, i, r)));
      expect(out[`reduceScatterTensor/${dtype}`], dtype).toEqual(premul(2, (q, i) => value(q, 2 * r + i)));
    }
    expect(out['allReduce/float32/40000']).toBeDefined();
  }
  const errors = (key: keyof Results['premulSum'][number]['errors']) => results.map((res) => res.errors[key]);
  expectAllFailed(
    errors('int'),
    /allReduce: premulSum is defined for floating-point tensors only, got int32/,
    'TypeError',
  );
  expectAllFailed(
    errors('noFactor'),
    /allReduce: premulSum needs a numeric factor, got undefined/,
    'TypeError',
  );
  expectAllFailed(
    errors('nanFactor'),
    /allReduce: premulSum factor NaN is not a finite float32/,
    'RangeError',
  );
  expectAllFailed(errors('overflow'), /premulSum factor 1000000 is not a finite float16/, 'RangeError');
  expectAllFailed(
    errors('factorWithSum'),
    /allReduce: factor is only for op 'premulSum', not 'sum'/,
    'TypeError',
  );
  expectAllFailed(
    errors('unknownOp'),
    /unknown reduce op "premul_sum"; expected one of .*bxor, premulSum/,
    'TypeError',
  );
  expectAllFailed(
    errors('mixed'),
    /allReduce\(float32\[2\], (sum|premulSum)\).*allReduce\(float32\[2\], (premulSum|sum)\)/,
    'CollectiveMismatchError',
  );
}

function checkLateOne(results: Results['late1']): void {
  const [root, one, ...rest] = results.map((r) => r.seen);
  expect(root).toMatchObject({ ok: false, name: 'CommTimeoutError' });
  expect(failed(root).message).toMatch(
    /^monitoredBarrier\(\) call #\d+ on group "world": rank 1 failed to pass monitoredBarrier within 1500 ms$/,
  );
  // Rank 0 waited its timeout, no less, and answered right after.
  expect(failed(root).ms).toBeGreaterThanOrEqual(MONITOR_MS - 50);
  expect(failed(root).ms).toBeLessThan(MONITOR_MS + 2_000);
  for (const o of rest) {
    expect(o).toMatchObject({ ok: false, name: 'CommTimeoutError' });
    expect(failed(o).message).toMatch(
      /rank \d arrived, but group rank 0 reports: .*rank 1 failed to pass monitoredBarrier within 1500 ms/,
    );
  }
  // The late rank learns rank 0's answer when it comes, instead of waiting out its own timeout.
  expect(failed(one).message).toMatch(/rank 1 failed to pass monitoredBarrier/);
  expect(failed(one).ms).toBeLessThan(MONITOR_MS);
  // Every rank made the call: the group is in step and usable.
  for (const r of results) expect(r.after).toEqual([4, 4]);
}

function checkObjects(results: Results['objects'], n: number): void {
  for (const [r, res] of results.entries()) {
    expect(res.scattered).toEqual({ to: r, list: Array(r).fill(r) });
    if (r !== n - 1) expect(res.gathered).toBeNull();
  }
  expect(results[n - 1].gathered).toEqual(ranksOf(n).map((r) => ({ rank: r, tag: r, length: r * 40_000 })));
  const errors = (key: keyof Results['objects'][number]['errors']) => results.map((res) => res.errors[key]);
  const short = errors('shortList').map(failed);
  expect(short[1]).toMatchObject({ name: 'RangeError' });
  expectAllFailed(
    short,
    /scatterObject: objs must be an array of 4 objects \(one per group rank\) on the source rank, got 1/,
  );
  const clone = errors('notCloneable').map(failed);
  expect(clone[0]).toMatchObject({ name: 'TypeError' });
  expectAllFailed(clone, /gatherObject: the object cannot be structured-cloned/);
  expectAllFailed(
    errors('badRoot'),
    /gatherObject: dst 4 is not a rank of group "world" \(size 4\)/,
    'RangeError',
  );
  expectAllFailed(
    errors('rootMismatch'),
    /gatherObject\(dst=\d\) as call #\d+ on group "world", but rank \d called gatherObject\(dst=\d\)/,
    'CollectiveMismatchError',
  );
  expectAllFailed(
    errors('scatterRootMismatch'),
    /scatterObject\(src=\d\) as call #\d+ on group "world", but rank \d called scatterObject\(src=\d\)/,
    'CollectiveMismatchError',
  );
}

function checkAnyOrder(results: Results['recvAnyOrder']): void {
  const [zero, one, two, three] = results;
  expect(zero.order).toEqual({ from: 1, first: [10, 10], second: [20, 20] });
  expect(zero.tagged).toEqual({ from: 1, values: [7, 7] });
  // The subgroup of global ranks 1, 2, 3: global rank 1 is its group rank 0.
  expect(three.sub).toBe(0);
  const [receiver, sender] = [failed(zero.sizeMismatch), failed(one.sizeMismatch)];
  expect(receiver).toMatchObject({ name: 'CollectiveMismatchError' });
  expect(receiver.message).toMatch(/expects float32\[3\] from rank 1, which sent float32\[4\]/);
  expect(sender).toMatchObject({ name: 'CollectiveMismatchError' });
  expect(two.sizeMismatch).toEqual({ ok: true });
  for (const r of results) {
    expect(failed(r.alone)).toMatchObject({
      name: 'RangeError',
      message: expect.stringMatching(/recvFromAny: group "group\[\d\]" has no other rank to receive from/),
    });
  }
}

function checkArguments(results: Results['argumentChecks'], n: number): void {
  const of = (key: keyof Results['argumentChecks'][number]) => results.map((r) => r[key]);
  const culprit = (outcomes: Outcome[], rank: number, name: string, pattern: RegExp) => {
    expect(outcomes[rank]).toMatchObject({ ok: false, name });
    expectAllFailed(outcomes, pattern);
    for (const [r, o] of outcomes.entries()) {
      if (r !== rank)
        expect(failed(o).message, `rank ${r}`).toMatch(new RegExp(`group rank ${rank} failed this call`));
    }
  };
  culprit(
    of('gatherListOffRoot'),
    1,
    'TypeError',
    /gather: gatherList must not be given on group rank 1, only on the root \(dst is 0\)/,
  );
  culprit(of('gatherListMissing'), 0, 'RangeError', /gather: gatherList must be an array of 4 tensors/);
  expect(of('emptyGatherListOffRoot')).toEqual(Array(n).fill({ ok: true }));
  culprit(of('scatterListShort'), 0, 'RangeError', /scatter: scatterList must be an array of 4 tensors/);
  // Every rank but the root passed a list: each fails itself; the root names the first.
  const offRoot = of('scatterListOffRoot').map(failed);
  expectAllFailed(
    offRoot,
    /scatter: scatterList must not be given on group rank \d, only on the root \(src is 0\)/,
  );
  for (const o of offRoot.slice(1)) expect(o.name).toBe('TypeError');
  culprit(
    of('allGatherIntoSize'),
    n - 1,
    'RangeError',
    /allGatherInto: output float32\[9\] must hold 4 × float32\[2\]/,
  );
  expectAllFailed(of('reduceRoot'), /reduce: dst -1 is not a rank of group "world"/, 'RangeError');
  culprit(of('monitoredFlag'), 0, 'TypeError', /monitoredBarrier: waitAllRanks must be a boolean, got yes/);
}

function checkSubgroups(results: Results['newSubgroups']): void {
  for (const [r, res] of results.entries()) {
    expect(res.subgroups).toEqual([
      [0, 1],
      [2, 3],
    ]);
    const block = r < 2 ? [0, 1] : [2, 3];
    expect(res.ranks).toEqual(block);
    expect(res.rank).toBe(r % 2);
    expect(res.sum).toEqual([block[0] + block[1]]);
    expect(failed(res.errors.notDivisible).message).toBe(
      'newSubgroups: the world size 4 is not divisible by groupSize 3',
    );
    expect(failed(res.errors.tooLarge).message).toBe('newSubgroups: groupSize 5 exceeds the world size 4');
    expect(failed(res.errors.zero)).toMatchObject({
      name: 'RangeError',
      message: 'newSubgroups: groupSize must be a positive integer, got 0',
    });
  }
}

function checkSplit(results: Results['splitGroup']): void {
  const [zero, one, two, three] = results;
  // Lists [[3, 1], [0]]: group ranks follow the list, so global rank 3 is group rank 0; rank 2 is in none.
  expect(three.split).toEqual({ ranks: [3, 1], rank: 0 });
  expect(one.split).toEqual({ ranks: [3, 1], rank: 1 });
  expect(zero.split).toEqual({ ranks: [0], rank: 0 });
  expect(two.split).toBeNull();
  expect(one.broadcast).toEqual([3]);
  expect(three.broadcast).toEqual([3]);
  // The parent's group ranks 2 and 1 are global ranks 3 and 2.
  expect(zero.fromParent).toBe('not in parent');
  expect(one.fromParent).toBeNull();
  expect(two.fromParent).toEqual({ ranks: [3, 2], rank: 1 });
  expect(three.fromParent).toEqual({ ranks: [3, 2], rank: 0 });
  for (const r of results) {
    expect(failed(r.errors.overlap).message).toBe(
      'splitGroup: group rank 1 is in split 0 and split 1; splits must not overlap',
    );
    expect(failed(r.errors.twice).message).toBe('splitGroup: group rank 0 is listed twice in split 0');
    expect(failed(r.errors.outside).message).toBe(
      'splitGroup: 4 in split 0 is not a rank of group "world" (size 4)',
    );
    expect(failed(r.errors.empty).message).toBe('splitGroup: split 0 is empty');
    expect(failed(r.errors.notLists)).toMatchObject({ name: 'TypeError' });
  }
}
