/**
 * Point-to-point messages between process ranks of one node through their
 * mailboxes (src/thread-group/store-backend/mailbox-memory.ts: each rank's
 * inbox a file of the job directory, waits parked on the process's doorbell):
 * every dtype around the inline cutoff at 2 and 3 ranks, many in-flight sends
 * on several tags, a message already there taken as the receive returns (the
 * mailbox's inline path: the keyed store's path never completes at once),
 * receives and sends that park and are woken, a ring filled past its room,
 * parked waits ended by a peer's death.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { JobFailedError, launchProcesses, RankFailedError } from '../src/index.ts';
import type { scenarios } from './fixtures/mailbox-processes.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(
  new URL('./fixtures/mailbox-processes.ts', import.meta.url),
);
const processes = (nproc: number) => (entry: URL, args: object) =>
  launchProcesses(entry, { nproc, args, collectiveTimeoutMs: 60_000, output: () => {} });

describe('mailboxes between process ranks', { timeout: 120_000 }, () => {
  let pair: Awaited<ReturnType<typeof runPair>>;
  const runPair = () =>
    fixture.runSteps(
      ['everyDtype', 'threeTags', 'alreadyThere', 'lateSends', 'parkedVerdicts', 'fullRing'],
      processes(2),
    );
  beforeAll(async () => {
    pair = await runPair();
  }, 120_000);

  it('carries every dtype on both sides of the inline cutoff, at 2 and 3 ranks', async () => {
    expect(pair.everyDtype).toEqual([[], []]);
    const three = await fixture.run('everyDtype', processes(3));
    expect(three).toEqual([[], [], []]);
  });

  it('keeps each tag in order when receives take the tags in another order', () => {
    expect(pair.threeTags).toEqual([[], []]);
  });

  it("hands over a message already in the receiver's mailbox as the receive returns, in place", () => {
    expect(pair.alreadyThere[1]).toEqual({ doneAtOnce: true, values: [1.5, -2, 3] });
  });

  it('wakes a receive parked long before its send', () => {
    expect(pair.lateSends[1]).toEqual([0, 0, 1, 1, 2, 2]);
  });

  it("gives a parked send its receive's verdict: taken, or refused in the receiver's words", () => {
    const [sender, receiver] = pair.parkedVerdicts;
    for (let round = 0; round < 3; round++) {
      expect(sender[2 * round]).toEqual({ ok: true });
      expect(sender[2 * round + 1]).toMatchObject({
        name: 'CollectiveMismatchError',
        message: expect.stringMatching(/expects float64\[2\] from rank 0, which sent float64\[1\]/),
      });
      expect(receiver[2 * round]).toBe(round);
      expect(receiver[2 * round + 1]).toBe('CollectiveMismatchError');
    }
  });

  it('writes the sends that found the ring full as the receiver reads, in order', () => {
    expect(pair.fullRing).toEqual([[], []]);
  });

  it('ends the waits of a send and a receive parked on a rank that was killed, naming it, long before their timeout', async () => {
    const started = performance.now();
    const error = await fixture.run('lostPeer', processes(3)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const { failures } = error as JobFailedError;
    expect(failures[0].rank).toBe(1);
    expect(failures[0].error.message).toMatch(/killed by SIGKILL/);
    expect(
      failures
        .slice(1)
        .map((f) => f.rank)
        .sort(),
    ).toEqual([0, 2]);
    for (const { rank, error: e } of failures.slice(1)) {
      expect(e.name, `rank ${rank}`).toBe(RankFailedError.name);
      expect(e.message).toContain('rank 1 (rank-1)');
    }
    // The calls' timeout is 60 s; the abort woke them.
    expect(performance.now() - started).toBeLessThan(30_000);
  });
});
