/**
 * FileTensorStore holds to the TensorStore contract, both ways it carries
 * values: files in the job directory, and shared-memory rings between the
 * ranks of a node (for values that name both ends, as every contract call does).
 */
import { FileTensorStore } from '../../src/file-store/index.ts';
import { storeJobs } from '../fixtures/store-jobs.ts';
import { describeTensorStoreContract } from './contract.ts';

const { newJob } = storeJobs('contract');

for (const rings of [false, true]) {
  describeTensorStoreContract(
    rings ? 'FileTensorStore, rings' : 'FileTensorStore, files',
    async (count) => {
      const dir = newJob();
      const ranks = Array.from({ length: count }, (_, rank) => rank);
      return ranks.map(
        (rank) => new FileTensorStore({ dir, rank, timeoutMs: 10_000, rings: rings ? { ranks } : undefined }),
      );
    },
    { sharedKeys: !rings },
  );
}
