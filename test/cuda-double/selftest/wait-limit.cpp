// TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS: a blocking call that can never return gives up with an error.
#include "check.h"

void test_wait_limit() {
  Gate gate;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  gate.hold(stream);
  setenv("TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS", "50", 1);
  CHECK_CUDA(cudaStreamSynchronize(stream), cudaErrorLaunchTimeout);
  CHECK(cudaGetLastError() == cudaErrorLaunchTimeout);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t lonely;
  CHECK_NCCL(ncclCommInitRank(&lonely, 2, id, 0), ncclSystemError);
  CHECK(lonely == nullptr);
  unsetenv("TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS");
  gate.open();
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaStreamDestroy(stream));
}
