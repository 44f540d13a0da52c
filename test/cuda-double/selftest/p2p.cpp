// Send/recv: a grouped exchange completes; the same calls without a group deadlock, as in NCCL.
#include <atomic>
#include <cstring>
#include <thread>

#include "ranks.h"

namespace {

class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  void wait() {
    arrived_++;
    CHECK(eventually([&] { return arrived_.load() >= parties_; }));
  }

 private:
  const int parties_;
  std::atomic<int> arrived_{0};
};

void grouped_exchange() {
  run_ranks(2, [](const Rank &r) {
    const int peer = 1 - r.rank;
    float *mine = device_copy(std::vector<float>{float(r.rank), 0.5f});
    float *theirs = device_copy(std::vector<float>(2, -1.0f));
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(mine, 2, ncclFloat32, peer, r.comm, r.stream));
    NCCL_OK(ncclRecv(theirs, 2, ncclFloat32, peer, r.comm, r.stream));
    NCCL_OK(ncclGroupEnd());
    CUDA_OK(cudaStreamSynchronize(r.stream));
    CHECK((host_copy(theirs, 2) == std::vector<float>{float(peer), 0.5f}));
    CUDA_OK(cudaFree(mine));
    CUDA_OK(cudaFree(theirs));
  });
}

/** Without a group, each rank's send waits at its stream's head for a receive queued behind the peer's send. */
void ungrouped_exchange_deadlocks() {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  Barrier queued(2);
  Barrier checked(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; rank++) {
    ranks.emplace_back([&, rank] {
      CUDA_OK(cudaSetDevice(rank));
      ncclComm_t comm;
      NCCL_OK(ncclCommInitRank(&comm, 2, id, rank));
      cudaStream_t stream;
      CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      cudaEvent_t done;
      CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
      float *mine = device_copy(std::vector<float>{1.0f});
      float *theirs = device_copy(std::vector<float>{0.0f});
      NCCL_OK(ncclSend(mine, 1, ncclFloat32, 1 - rank, comm, stream));
      NCCL_OK(ncclRecv(theirs, 1, ncclFloat32, 1 - rank, comm, stream));
      CUDA_OK(cudaEventRecord(done, stream));
      queued.wait();
      // Both ranks' calls are queued: if they could complete, they just did (every call lets streams progress).
      CHECK_CUDA(cudaEventQuery(done), cudaErrorNotReady);
      checked.wait();
      // Abort is the way out; the stream then drains.
      NCCL_OK(ncclCommAbort(comm));
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(cudaEventQuery(done));
      CUDA_OK(cudaEventDestroy(done));
      CUDA_OK(cudaStreamDestroy(stream));
      CUDA_OK(cudaFree(mine));
      CUDA_OK(cudaFree(theirs));
    });
  }
  for (std::thread &rank : ranks) rank.join();
}

/** One group may span streams: the calls progress together, and every stream used waits for them. */
void group_across_streams() {
  ncclComm_t comms[2];
  make_pair(comms);
  cudaStream_t streams[3];
  cudaEvent_t done[3];
  for (int i = 0; i < 3; i++) {
    CUDA_OK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
  }
  int32_t *buffers[4];
  for (int i = 0; i < 4; i++) buffers[i] = device_copy(std::vector<int32_t>{i * 100});
  // Rank 0 sends on one stream and receives on another; rank 1 does both on a third.
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(buffers[0], 1, ncclInt32, 1, comms[0], streams[0]));
  NCCL_OK(ncclRecv(buffers[1], 1, ncclInt32, 1, comms[0], streams[1]));
  launched(comms[0], ncclGroupEnd());
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclRecv(buffers[2], 1, ncclInt32, 0, comms[1], streams[2]));
  NCCL_OK(ncclSend(buffers[3], 1, ncclInt32, 0, comms[1], streams[2]));
  launched(comms[1], ncclGroupEnd());
  for (int i = 0; i < 3; i++) CUDA_OK(cudaEventRecord(done[i], streams[i]));
  for (int i = 0; i < 3; i++) expect_completes(done[i]);
  CHECK(host_copy(buffers[1], 1)[0] == 300);
  CHECK(host_copy(buffers[2], 1)[0] == 0);
  for (int i = 0; i < 4; i++) CUDA_OK(cudaFree(buffers[i]));
  for (int i = 0; i < 3; i++) {
    CUDA_OK(cudaEventDestroy(done[i]));
    CUDA_OK(cudaStreamDestroy(streams[i]));
  }
  for (ncclComm_t comm : comms) NCCL_OK(ncclCommDestroy(comm));
}

void mismatched_pair() {
  ncclComm_t comms[2];
  make_pair(comms);
  cudaStream_t streams[2];
  for (cudaStream_t &stream : streams) CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *buffer = device_copy(std::vector<float>(4, 0.0f));
  CHECK_NCCL(ncclSend(buffer, 4, ncclFloat32, 1, comms[0], streams[0]), ncclInProgress);
  CHECK_NCCL(ncclRecv(buffer, 3, ncclFloat32, 0, comms[1], streams[1]), ncclInProgress);
  CHECK(settled_state(comms[0]) == ncclInvalidUsage);
  CHECK(settled_state(comms[1]) == ncclInvalidUsage);
  CHECK(strstr(ncclGetLastError(comms[0]), "mismatched") != nullptr);
  // A communicator in error refuses further calls.
  CHECK_NCCL(ncclSend(buffer, 4, ncclFloat32, 1, comms[0], streams[0]), ncclInvalidUsage);
  for (ncclComm_t comm : comms) NCCL_OK(ncclCommAbort(comm));
  for (cudaStream_t stream : streams) CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(buffer));
}

}  // namespace

void test_p2p() {
  grouped_exchange();
  ungrouped_exchange_deadlocks();
  group_across_streams();
  mismatched_pair();
}
