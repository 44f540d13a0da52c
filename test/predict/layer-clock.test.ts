/** A layer call's own clock (predict/layer-clock.ts): where its calls are issued, and what the rank's clock makes of it. */
import { afterEach, describe, expect, it } from 'vitest';
import { loadTopology } from '../../src/index.ts';
import { callIssuer, layerCall } from '../../src/predict/layer-clock.ts';
import { RankClock, setRankClock } from '../../src/predict/rank-clock.ts';

const topology = loadTopology('h100-nvlink');
afterEach(() => setRankClock(undefined));

function predicting(): RankClock {
  const rank = new RankClock(0, topology);
  setRankClock(rank);
  return rank;
}

describe('layer calls', () => {
  it('issue their calls at their own clock; the rank catches up where the program waits, gaps counted as waiting', async () => {
    const rank = predicting();
    rank.compute(10);
    const layer = layerCall();
    expect(layer.issuedUs).toBe(10);
    const issuer = layer.run(() => callIssuer(rank));
    expect(issuer).not.toBe(rank);
    expect(callIssuer(rank)).toBe(rank);
    // Its calls, as their timings become known; the layer's own wait moves only its clock.
    issuer.include?.({ startUs: 20, endUs: 30 });
    issuer.waitFor({ startUs: 20, endUs: 30 });
    expect(issuer.now()).toBe(30);
    expect(issuer.postedUs?.()).toBe(10);
    issuer.include?.({ startUs: 50, endUs: 70 });
    issuer.include?.({ startUs: 55, endUs: 60 });
    expect(rank.now()).toBe(10);
    const work = layer.settle(Promise.resolve('done'));
    rank.compute(15);
    expect(await work).toBe('done');
    // Waited from 25 to 70: 5 + 20 with a call in flight, 20 (30 to 50) waiting for its peers.
    expect(rank.totals()).toMatchObject({ endUs: 70, computeUs: 25, exposedCommUs: 25, waitUs: 20 });
  });

  it('a fork is issued at its parent’s clock, and moves it only where the parent waits on it', async () => {
    const rank = predicting();
    const layer = layerCall();
    const parent = layer.run(() => callIssuer(rank));
    const task = layer.fork();
    const child = task.run(() => callIssuer(rank));
    child.include?.({ startUs: 0, endUs: 40 });
    child.waitFor({ startUs: 0, endUs: 40 });
    expect(parent.now()).toBe(0);
    const done = task.settle(Promise.resolve());
    expect(parent.now()).toBe(0);
    await done;
    expect(parent.now()).toBe(40);
  });

  it('change nothing where the rank does not predict', () => {
    const outcome = Promise.resolve(1);
    const layer = layerCall();
    expect(layer.issuedUs).toBeUndefined();
    expect(layer.settle(outcome)).toBe(outcome);
    expect(layer.run(() => 3)).toBe(3);
    expect(layer.fork()).toBe(layer);
  });
});
