// Communicator lifetime: versions and ids, init (blocking, non-blocking, grouped), argument checks, mismatches,
// duplicate devices, finalize, abort.
#include <cstring>

#include "ranks.h"

namespace {

void version_and_ids() {
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  CHECK(version == 22105);
  ncclUniqueId a, b;
  NCCL_OK(ncclGetUniqueId(&a));
  NCCL_OK(ncclGetUniqueId(&b));
  CHECK(memcmp(&a, &b, sizeof a) != 0);
  CHECK(strcmp(ncclGetErrorString(ncclInProgress), "NCCL operation in progress") == 0);
}

void non_blocking_init() {
  ncclComm_t comms[2];
  make_pair(comms);  // rank 0's init returned ncclInProgress: rank 1 had not joined yet
  for (ncclComm_t comm : comms) {
    CHECK(settled_state(comm) == ncclSuccess);
    NCCL_OK(ncclCommDestroy(comm));
  }

  // Until every rank has joined, the comm reports ncclInProgress and refuses calls.
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t lonely;
  CHECK_NCCL(ncclCommInitRankConfig(&lonely, 2, id, 0, &config), ncclInProgress);
  ncclResult_t state;
  NCCL_OK(ncclCommGetAsyncError(lonely, &state));
  CHECK(state == ncclInProgress);
  float *buffer = device_copy(std::vector<float>{1.0f});
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, lonely, nullptr), ncclInvalidArgument);
  CHECK(tcdouble_live_comms() == 1);
  NCCL_OK(ncclCommAbort(lonely));
  CUDA_OK(cudaFree(buffer));
}

void grouped_init() {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t comms[2];
  NCCL_OK(ncclGroupStart());
  for (int rank = 0; rank < 2; rank++) {
    CUDA_OK(cudaSetDevice(rank));
    NCCL_OK(ncclCommInitRank(&comms[rank], 2, id, rank));
  }
  NCCL_OK(ncclGroupEnd());
  CUDA_OK(cudaSetDevice(0));
  for (ncclComm_t comm : comms) {
    ncclResult_t state;
    NCCL_OK(ncclCommGetAsyncError(comm, &state));
    CHECK(state == ncclSuccess);
    NCCL_OK(ncclCommDestroy(comm));
  }
}

void invalid_arguments() {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  CHECK_NCCL(ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  CHECK_NCCL(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument);
  config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 5;
  CHECK_NCCL(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument);
  CHECK(tcdouble_live_comms() == 0);

  NCCL_OK(ncclCommInitRank(&comm, 1, id, 0));
  float *buffer = device_copy(std::vector<float>{2.0f});
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 1, ncclFloat8e4m3, ncclSum, comm, nullptr), ncclInvalidArgument);
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 1, ncclFloat32, static_cast<ncclRedOp_t>(9), comm, nullptr),
             ncclInvalidArgument);
  CHECK_NCCL(ncclBroadcast(buffer, buffer, 1, ncclFloat32, 1, comm, nullptr), ncclInvalidArgument);
  CHECK_NCCL(ncclSend(buffer, 1, ncclFloat32, -1, comm, nullptr), ncclInvalidArgument);
  CHECK_NCCL(ncclAllReduce(nullptr, buffer, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(0x99)),
             ncclUnhandledCudaError);
  CHECK_NCCL(ncclGroupEnd(), ncclInvalidUsage);
  // A failed call inside a group fails the group, and none of its calls run.
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comm, nullptr));
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 1, static_cast<ncclDataType_t>(42), ncclSum, comm, nullptr),
             ncclInvalidArgument);
  CHECK_NCCL(ncclGroupEnd(), ncclInvalidArgument);
  tcdouble_fail_next("ncclAllReduce", ncclSystemError);
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSystemError);
  NCCL_OK(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclAvg, comm, nullptr));
  CHECK(host_copy(buffer, 1)[0] == 2.0f);
  NCCL_OK(ncclCommDestroy(comm));
  CHECK_NCCL(ncclCommDestroy(comm), ncclInvalidArgument);
  NCCL_OK(ncclCommDestroy(nullptr));
  CUDA_OK(cudaFree(buffer));
}

/** NCCL refuses two ranks of one communicator on one GPU. */
void duplicate_device() {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comms[2];
  for (int rank = 0; rank < 2; rank++) {
    const ncclResult_t result = ncclCommInitRankConfig(&comms[rank], 2, id, rank, &config);
    CHECK(result == ncclInProgress || result == ncclInvalidUsage);
  }
  for (ncclComm_t comm : comms) {
    CHECK(settled_state(comm) == ncclInvalidUsage);
    CHECK(strstr(ncclGetLastError(comm), "Duplicate GPU") != nullptr);
    NCCL_OK(ncclCommDestroy(comm));
  }
}

/**
 * A non-blocking comm's first use of a connection returns ncclInProgress, and
 * the comm refuses calls until ncclCommGetAsyncError has seen it through.
 */
void first_use_in_progress() {
  ncclComm_t comms[2];
  make_pair(comms);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *buffer = device_copy(std::vector<float>(2, 1.0f));
  CHECK_NCCL(ncclSend(buffer, 1, ncclFloat32, 1, comms[0], stream), ncclInProgress);
  CHECK_NCCL(ncclSend(buffer, 1, ncclFloat32, 1, comms[0], stream), ncclInvalidArgument);
  ncclResult_t state;
  NCCL_OK(ncclCommGetAsyncError(comms[0], &state));
  CHECK(state == ncclInProgress);
  NCCL_OK(ncclCommGetAsyncError(comms[0], &state));
  CHECK(state == ncclSuccess);
  NCCL_OK(ncclSend(buffer, 1, ncclFloat32, 1, comms[0], stream));  // the connection is up now
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comms[0], stream), ncclInProgress);
  for (ncclComm_t comm : comms) NCCL_OK(ncclCommAbort(comm));
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(buffer));
}

void mismatched_collective() {
  ncclComm_t comms[2];
  make_pair(comms);
  cudaStream_t streams[2];
  for (cudaStream_t &stream : streams) CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *buffer = device_copy(std::vector<float>(5, 1.0f));
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 4, ncclFloat32, ncclSum, comms[0], streams[0]), ncclInProgress);
  CHECK_NCCL(ncclAllReduce(buffer, buffer, 5, ncclFloat32, ncclSum, comms[1], streams[1]), ncclInProgress);
  for (ncclComm_t comm : comms) {
    CHECK(settled_state(comm) == ncclInvalidUsage);
    NCCL_OK(ncclCommAbort(comm));
  }
  for (cudaStream_t stream : streams) CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(buffer));
}

/** Abort drops the rank's queued calls (its stream drains); a peer's calls wait on until it aborts too. */
void abort_pending() {
  ncclComm_t comms[2];
  make_pair(comms);
  cudaStream_t streams[2];
  cudaEvent_t done[2];
  for (int rank = 0; rank < 2; rank++) {
    CUDA_OK(cudaStreamCreateWithFlags(&streams[rank], cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&done[rank], cudaEventDisableTiming));
  }
  float *buffer = device_copy(std::vector<float>{1.0f});
  launched(comms[0], ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comms[0], streams[0]));
  CUDA_OK(cudaEventRecord(done[0], streams[0]));
  CHECK_CUDA(cudaEventQuery(done[0]), cudaErrorNotReady);
  NCCL_OK(ncclCommAbort(comms[0]));
  expect_completes(done[0]);
  // Rank 0 left before making the call: rank 1's waits for it.
  launched(comms[1], ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comms[1], streams[1]));
  CUDA_OK(cudaEventRecord(done[1], streams[1]));
  CHECK_CUDA(cudaEventQuery(done[1]), cudaErrorNotReady);
  NCCL_OK(ncclCommAbort(comms[1]));
  expect_completes(done[1]);
  for (int rank = 0; rank < 2; rank++) {
    CUDA_OK(cudaEventDestroy(done[rank]));
    CUDA_OK(cudaStreamDestroy(streams[rank]));
  }
  CUDA_OK(cudaFree(buffer));
}

/** A non-blocking finalize reports ncclInProgress until the rank's queued calls have completed. */
void finalize() {
  ncclComm_t comms[2];
  make_pair(comms);
  cudaStream_t streams[2];
  for (cudaStream_t &stream : streams) CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *buffer = device_copy(std::vector<float>{1.0f, 1.0f});
  launched(comms[0], ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comms[0], streams[0]));
  CHECK_NCCL(ncclCommFinalize(comms[0]), ncclInProgress);
  ncclResult_t state;
  NCCL_OK(ncclCommGetAsyncError(comms[0], &state));
  CHECK(state == ncclInProgress);
  CHECK_NCCL(ncclCommFinalize(comms[0]), ncclInvalidArgument);
  launched(comms[1], ncclAllReduce(buffer + 1, buffer + 1, 1, ncclFloat32, ncclSum, comms[1], streams[1]));
  CHECK(settled_state(comms[0]) == ncclSuccess);
  NCCL_OK(ncclCommFinalize(comms[1]));
  for (ncclComm_t comm : comms) NCCL_OK(ncclCommDestroy(comm));
  for (cudaStream_t stream : streams) CUDA_OK(cudaStreamDestroy(stream));
  CHECK((host_copy(buffer, 2) == std::vector<float>{2.0f, 2.0f}));
  CUDA_OK(cudaFree(buffer));
}

}  // namespace

void test_comms() {
  version_and_ids();
  non_blocking_init();
  grouped_init();
  invalid_arguments();
  duplicate_device();
  first_use_in_progress();
  mismatched_collective();
  abort_pending();
  finalize();
}
