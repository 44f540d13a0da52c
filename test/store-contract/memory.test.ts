/** MemoryTensorStore holds to the TensorStore contract: ranks as stores of one thread over one shared table. */
import { MemoryTensorStore } from '../../src/memory-store/memory-tensor-store.ts';
import { describeTensorStoreContract } from './contract.ts';

describeTensorStoreContract(
  'MemoryTensorStore',
  async (ranks) => {
    const shared = MemoryTensorStore.createShared();
    return Array.from(
      { length: ranks },
      (_, rank) => new MemoryTensorStore(shared, { rank, timeoutMs: 10_000 }),
    );
  },
  { sharedKeys: true },
);
