#include "check.h"

#include "ranks.h"

#include <chrono>
#include <thread>

bool eventually(const std::function<bool()> &condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void expect_completes(cudaEvent_t event) {
  cudaError_t status = cudaErrorNotReady;
  CHECK(eventually([&] { return (status = cudaEventQuery(event)) != cudaErrorNotReady; }));
  CUDA_OK(status);
}

void launched(ncclComm_t comm, ncclResult_t result) {
  CHECK(result == ncclSuccess || result == ncclInProgress);
  ncclResult_t state = ncclInProgress;
  CHECK(eventually([&] {
    NCCL_OK(ncclCommGetAsyncError(comm, &state));
    return state != ncclInProgress;
  }));
  NCCL_OK(state);
}

void expect_nothing_alive() {
  CHECK(tcdouble_live_allocations() == 0);
  CHECK(tcdouble_live_streams() == 0);
  CHECK(tcdouble_live_events() == 0);
  CHECK(tcdouble_open_ipc_mappings() == 0);
  CHECK(tcdouble_live_libraries() == 0);
  CHECK(tcdouble_live_comms() == 0);
}

Gate::Gate() {
  int device;
  CUDA_OK(cudaGetDevice(&device));
  make_pair(comms_);
  for (int rank = 0; rank < 2; rank++) {
    CUDA_OK(cudaSetDevice(rank));
    CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&buffers_[rank]), sizeof(float)));
  }
  CUDA_OK(cudaStreamCreateWithFlags(&opener_, cudaStreamNonBlocking));
  CUDA_OK(cudaSetDevice(device));
}

Gate::~Gate() {
  CUDA_OK(cudaStreamSynchronize(opener_));
  CUDA_OK(cudaStreamDestroy(opener_));
  for (int rank = 0; rank < 2; rank++) {
    NCCL_OK(ncclCommDestroy(comms_[rank]));
    CUDA_OK(cudaFree(buffers_[rank]));
  }
}

void Gate::hold(cudaStream_t stream) {
  launched(comms_[0], ncclAllReduce(buffers_[0], buffers_[0], 1, ncclFloat32, ncclSum, comms_[0], stream));
}

void Gate::open() {
  launched(comms_[1], ncclAllReduce(buffers_[1], buffers_[1], 1, ncclFloat32, ncclSum, comms_[1], opener_));
}
