#include "ranks.h"

#include <thread>
#include <vector>

void run_ranks(int nranks, const std::function<void(const Rank &)> &body) {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; rank++) {
    threads.emplace_back([&, rank] {
      CUDA_OK(cudaSetDevice(rank));
      Rank self{rank, nranks, nullptr, nullptr};
      NCCL_OK(ncclCommInitRank(&self.comm, nranks, id, rank));
      CUDA_OK(cudaStreamCreateWithFlags(&self.stream, cudaStreamNonBlocking));
      body(self);
      CUDA_OK(cudaStreamSynchronize(self.stream));
      CUDA_OK(cudaStreamDestroy(self.stream));
      NCCL_OK(ncclCommDestroy(self.comm));
    });
  }
  for (std::thread &thread : threads) thread.join();
}

void make_pair(ncclComm_t comms[2]) {
  int device;
  CUDA_OK(cudaGetDevice(&device));
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  CUDA_OK(cudaSetDevice(0));
  CHECK_NCCL(ncclCommInitRankConfig(&comms[0], 2, id, 0, &config), ncclInProgress);
  CUDA_OK(cudaSetDevice(1));
  NCCL_OK(ncclCommInitRankConfig(&comms[1], 2, id, 1, &config));
  CUDA_OK(cudaSetDevice(device));
}

ncclResult_t settled_state(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  CHECK(eventually([&] {
    NCCL_OK(ncclCommGetAsyncError(comm, &state));
    return state != ncclInProgress;
  }));
  return state;
}
