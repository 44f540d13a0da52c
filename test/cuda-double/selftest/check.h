/*
 * Helpers of the double's self-test: checks that exit with the failing
 * expression, polling for what must eventually happen (never timing what
 * must not), device buffers, and a gate that holds a stream until opened.
 */
#ifndef TCDOUBLE_SELFTEST_CHECK_H
#define TCDOUBLE_SELFTEST_CHECK_H

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "nccl.h"
#include "tcdouble-control.h"

#define CHECK(condition)                                                                   \
  do {                                                                                     \
    if (!(condition)) {                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition);        \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define CHECK_CUDA(call, expected)                                                                       \
  do {                                                                                                   \
    const cudaError_t got_ = (call);                                                                     \
    if (got_ != (expected)) {                                                                            \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call,                 \
              cudaGetErrorName(got_), cudaGetErrorName(expected));                                       \
      exit(1);                                                                                           \
    }                                                                                                    \
  } while (0)

#define CUDA_OK(call) CHECK_CUDA(call, cudaSuccess)

#define CHECK_NCCL(call, expected)                                                                          \
  do {                                                                                                      \
    const ncclResult_t got_ = (call);                                                                       \
    if (got_ != (expected)) {                                                                               \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d; last error: %s\n", __FILE__, __LINE__, #call, \
              got_, ncclGetErrorString(got_), (expected), ncclGetLastError(nullptr));                      \
      exit(1);                                                                                              \
    }                                                                                                       \
  } while (0)

#define NCCL_OK(call) CHECK_NCCL(call, ncclSuccess)

/** Waits (up to 10 s, polling) for something that must happen; false if it never did. */
bool eventually(const std::function<bool()> &condition);

/** Polls the event until it completes; fails the test if it never does. */
void expect_completes(cudaEvent_t event);

template <class T>
T *device_copy(const std::vector<T> &values) {
  void *pointer = nullptr;
  CUDA_OK(cudaMalloc(&pointer, values.size() * sizeof(T)));
  CUDA_OK(cudaMemcpy(pointer, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
  return static_cast<T *>(pointer);
}

template <class T>
std::vector<T> host_copy(const T *pointer, size_t count) {
  std::vector<T> values(count);
  CUDA_OK(cudaMemcpy(values.data(), pointer, count * sizeof(T), cudaMemcpyDeviceToHost));
  return values;
}

/**
 * Checks the result of a call queued on a non-blocking comm (ncclInProgress
 * is fine: NCCL returns it while it sets up a first-used connection) and polls
 * until the comm is ready for its next call.
 */
void launched(ncclComm_t comm, ncclResult_t result);

/** Every count of the double's control API is 0: whatever a section made, it released. */
void expect_nothing_alive();

/**
 * Holds a stream until opened: rank 0 of a 2-rank communicator queues an
 * allreduce on it, which completes only when open() queues rank 1's.
 */
class Gate {
 public:
  Gate();
  ~Gate();
  void hold(cudaStream_t stream);
  void open();

 private:
  ncclComm_t comms_[2];
  cudaStream_t opener_;
  float *buffers_[2];
};

void test_runtime();
void test_streams();
void test_collectives();
void test_p2p();
void test_comms();
void test_ipc(const char *self);
int ipc_child(const char *memory_handle, const char *event_handle);
void test_kernels(const char *ptx_path);
void test_kernel_vectors(const char *ptx_path, const char *vectors_path);
void test_wait_limit();

#endif  // TCDOUBLE_SELFTEST_CHECK_H
