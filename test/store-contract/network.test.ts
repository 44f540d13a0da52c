/** NetworkTensorStore holds to the TensorStore contract: ranks as stores of this process, connected over loopback. */
import { connectAll, listenOnLoopback } from '../fixtures/network-job.ts';
import { describeTensorStoreContract } from './contract.ts';

let jobs = 0;

describeTensorStoreContract(
  'NetworkTensorStore',
  async (ranks) => {
    const jobId = `contract-${++jobs}`;
    const stores = await Promise.all(
      Array.from({ length: ranks }, (_, rank) => listenOnLoopback(rank, jobId)),
    );
    await connectAll(stores);
    return stores;
  },
  { sharedKeys: false },
);
