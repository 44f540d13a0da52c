/**
 * NodeRoutedStore holds to the TensorStore contract: ranks 0 and 1 on one
 * node, rank 2 on another, so a value of rank 0 for both consumers goes
 * through the node's FileTensorStore (rings) and the NetworkTensorStore at once.
 */
import { NodeRoutedStore } from '../../src/context/node-routed-store.ts';
import { FileTensorStore } from '../../src/file-store/index.ts';
import { connectAll, listenOnLoopback } from '../fixtures/network-job.ts';
import { storeJobs } from '../fixtures/store-jobs.ts';
import { describeTensorStoreContract } from './contract.ts';

const { newJob } = storeJobs('routed');
let jobs = 0;

describeTensorStoreContract(
  'NodeRoutedStore',
  async (count) => {
    const ranks = Array.from({ length: count }, (_, rank) => rank);
    const nodeOf = ranks.map((rank) => (rank < 2 ? 'a' : 'b'));
    const dirs = { a: newJob(), b: newJob() };
    const jobId = `routed-${++jobs}`;
    const far = await Promise.all(ranks.map((rank) => listenOnLoopback(rank, jobId)));
    await connectAll(far);
    return ranks.map((rank) => {
      const node = nodeOf[rank] as 'a' | 'b';
      const onNode = ranks.filter((r) => nodeOf[r] === node);
      const near = new FileTensorStore({
        dir: dirs[node],
        rank,
        timeoutMs: 10_000,
        rings: { ranks: onNode },
      });
      return new NodeRoutedStore(near, far[rank], nodeOf, rank);
    });
  },
  { sharedKeys: false },
);
