// Devices, errors, memory, handles and failure injection.
#include <cstring>
#include <thread>

#include "check.h"

namespace {

void devices() {
  int count = -1;
  CUDA_OK(cudaGetDeviceCount(&count));
  CHECK(count == 4);
  CHECK_CUDA(cudaGetDeviceCount(nullptr), cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_CUDA(cudaSetDevice(4), cudaErrorInvalidDevice);
  CHECK_CUDA(cudaSetDevice(-1), cudaErrorInvalidDevice);
  // The current device belongs to the thread.
  CUDA_OK(cudaSetDevice(2));
  std::thread other([] {
    int device = -1;
    CUDA_OK(cudaGetDevice(&device));
    CHECK(device == 0);
    CUDA_OK(cudaSetDevice(3));
  });
  other.join();
  int device = -1;
  CUDA_OK(cudaGetDevice(&device));
  CHECK(device == 2);
  CUDA_OK(cudaSetDevice(0));
}

void error_texts() {
  CHECK(strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorNotReady), "device not ready") == 0);
  CHECK(strcmp(cudaGetErrorName(static_cast<cudaError_t>(12345)), "unrecognized error code") == 0);
}

void memory() {
  void *empty = reinterpret_cast<void *>(1);
  CUDA_OK(cudaMalloc(&empty, 0));
  CHECK(empty == nullptr);
  CHECK_CUDA(cudaMalloc(nullptr, 16), cudaErrorInvalidValue);
  const std::vector<int> values = {1, 2, 3, 4};
  int *buffer = device_copy(values);
  CHECK(tcdouble_live_allocations() == 1);
  CHECK(host_copy(buffer, 4) == values);
  CHECK_CUDA(cudaMemcpy(buffer, values.data(), 16, static_cast<cudaMemcpyKind>(7)), cudaErrorInvalidMemcpyDirection);
  // memset takes device memory only, anywhere inside an allocation.
  int host[4] = {0, 0, 0, 0};
  CHECK_CUDA(cudaMemsetAsync(host, 0, sizeof host, nullptr), cudaErrorInvalidValue);
  CHECK_CUDA(cudaMemsetAsync(buffer + 2, 0, 16, nullptr), cudaErrorInvalidValue);
  CUDA_OK(cudaMemsetAsync(buffer + 2, 0, 8, nullptr));
  CHECK(host_copy(buffer, 4) == std::vector<int>({1, 2, 0, 0}));
  CHECK_CUDA(cudaFree(buffer + 1), cudaErrorInvalidValue);
  CHECK_CUDA(cudaFree(host), cudaErrorInvalidValue);
  CUDA_OK(cudaFree(nullptr));
  CUDA_OK(cudaFree(buffer));
  CHECK_CUDA(cudaFree(buffer), cudaErrorInvalidValue);
}

void handles() {
  const cudaStream_t bogus_stream = reinterpret_cast<cudaStream_t>(0x1234);
  CHECK_CUDA(cudaStreamSynchronize(bogus_stream), cudaErrorInvalidResourceHandle);
  CHECK_CUDA(cudaStreamSynchronize(cudaStreamPerThread), cudaErrorNotSupported);
  CHECK_CUDA(cudaStreamDestroy(nullptr), cudaErrorInvalidResourceHandle);
  CHECK_CUDA(cudaStreamCreateWithFlags(nullptr, 0), cudaErrorInvalidValue);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, 4), cudaErrorInvalidValue);
  CUDA_OK(cudaStreamCreateWithFlags(&stream, 0));
  CHECK(tcdouble_live_streams() == 1);
  CUDA_OK(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaStreamDestroy(stream), cudaErrorInvalidResourceHandle);
  CHECK(tcdouble_live_streams() == 0);
  cudaEvent_t event;
  CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventInterprocess), cudaErrorInvalidValue);
  CHECK_CUDA(cudaEventCreateWithFlags(&event, 0x80), cudaErrorInvalidValue);
  CHECK_CUDA(cudaEventQuery(reinterpret_cast<cudaEvent_t>(0x1234)), cudaErrorInvalidResourceHandle);
  CUDA_OK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  CUDA_OK(cudaEventQuery(event));  // never recorded: complete
  CHECK_CUDA(cudaStreamWaitEvent(nullptr, event, 8), cudaErrorInvalidValue);
  CUDA_OK(cudaEventDestroy(event));
  CHECK_CUDA(cudaEventDestroy(event), cudaErrorInvalidResourceHandle);
}

void injected_failures() {
  tcdouble_fail_next("cudaMalloc", cudaErrorMemoryAllocation);
  void *pointer = nullptr;
  CHECK_CUDA(cudaMalloc(&pointer, 8), cudaErrorMemoryAllocation);
  CUDA_OK(cudaMalloc(&pointer, 8));
  CUDA_OK(cudaFree(pointer));
}

void no_devices() {
  setenv("TENSORCOMM_CUDA_DOUBLE_DEVICES", "0", 1);
  int count = -1;
  CHECK_CUDA(cudaGetDeviceCount(&count), cudaErrorNoDevice);
  CHECK(count == 0);
  void *pointer = nullptr;
  CHECK_CUDA(cudaMalloc(&pointer, 8), cudaErrorNoDevice);
  setenv("TENSORCOMM_CUDA_DOUBLE_DEVICES", "4", 1);
}

void reset() {
  void *pointer = nullptr;
  CUDA_OK(cudaMalloc(&pointer, 8));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  tcdouble_fail_next("cudaFree", cudaErrorUnknown);
  tcdouble_reset();
  CHECK(tcdouble_live_allocations() == 0);
  CHECK(tcdouble_live_streams() == 0);
  CHECK_CUDA(cudaFree(nullptr), cudaSuccess);  // the armed failure went with the reset
}

}  // namespace

void test_runtime() {
  devices();
  error_texts();
  memory();
  handles();
  injected_failures();
  no_devices();
  reset();
}
