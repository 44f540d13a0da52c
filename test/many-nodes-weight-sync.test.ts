/**
 * WeightSyncEngine across real "nodes" (test/many-nodes.test.ts's fixture:
 * each node a mount namespace with a private /dev/shm, so ranks of different
 * nodes meet only through the network store): 1 sender on node 0, 3
 * receivers on node 1. Every receiver gets the model exact, and the payload
 * crosses once, to node 1's relay (test/fixtures/weight-sync-nodes-rank.ts).
 */
import { describe, expect, it } from 'vitest';
import { freePort } from './fixtures/free-port.ts';
import { canMakeNodes, exitCodes, runOnNode } from './fixtures/node-namespace.ts';
import { nodeScript } from './fixtures/node-script.ts';
import { torchrunVars } from './fixtures/torchrun-env.ts';

const ROOT = new URL('..', import.meta.url).pathname;

/** Global ranks by node: rank 0 alone on node 0, ranks 1–3 on node 1. */
const LAYOUT = [[0], [1, 2, 3]];

describe.skipIf(!canMakeNodes)('weight sync on two nodes', { timeout: 120_000 }, () => {
  it('1 sender on node 0, 3 receivers on node 1: exact, and the payload crosses once', async () => {
    const argv = ['node', ...(await nodeScript('test/fixtures/weight-sync-nodes-rank.ts'))];
    const port = String(await freePort());
    // torchrun's variables by hand, the node named by TENSORCOMM_NODE_ID: nodes of different sizes.
    const runs = await Promise.all(
      LAYOUT.map((ranks, node) =>
        runOnNode(
          ranks.map((_, local) => ({
            argv,
            env: torchrunVars(LAYOUT, node, local, port),
          })),
          ROOT,
        ),
      ),
    );
    for (const [node, run] of runs.entries())
      expect(exitCodes(run), run.out).toEqual(LAYOUT[node].map(() => 0));
    const out = runs.map((r) => r.out).join('\n');
    const passed = out.split('\n').filter((line) => / weight sync across nodes passed/.test(line));
    expect(passed.map((line) => line.split(' weight sync')[0]).sort(), out).toEqual([
      'rank 0',
      'rank 1',
      'rank 2',
      'rank 3',
    ]);
    console.log(out.split('\n').find((line) => line.startsWith('rank 0: the')));
  });
});
