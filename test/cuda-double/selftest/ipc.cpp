// CUDA IPC between this process and a child it forks and execs: memory and event handles, both ways.
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "check.h"

namespace {

constexpr size_t kBytes = 4096;
constexpr size_t kQuarter = kBytes / 4;

template <class Handle>
std::string to_hex(const Handle &handle) {
  std::string text;
  char digits[3];
  for (unsigned char byte : handle.reserved) {
    snprintf(digits, sizeof digits, "%02x", byte);
    text += digits;
  }
  return text;
}

template <class Handle>
Handle from_hex(const char *text) {
  Handle handle;
  CHECK(strlen(text) == 2 * sizeof handle.reserved);
  for (size_t i = 0; i < sizeof handle.reserved; i++) {
    handle.reserved[i] = static_cast<char>(std::stoi(std::string(text + 2 * i, 2), nullptr, 16));
  }
  return handle;
}

/** The child tells the parent, through this descriptor, that it has seen the event not ready yet. */
constexpr int kNotifyFd = 3;

}  // namespace

void test_ipc(const char *self) {
  unsigned char *buffer = device_copy(std::vector<unsigned char>(kBytes, 0xa1));
  cudaIpcMemHandle_t memory_handle, interior_handle;
  CUDA_OK(cudaIpcGetMemHandle(&memory_handle, buffer));
  CUDA_OK(cudaIpcGetMemHandle(&interior_handle, buffer + 100));
  CHECK(memcmp(&memory_handle, &interior_handle, sizeof memory_handle) == 0);
  int host = 0;
  CHECK_CUDA(cudaIpcGetMemHandle(&memory_handle, &host), cudaErrorInvalidValue);
  CUDA_OK(cudaIpcGetMemHandle(&memory_handle, buffer));
  void *mapped = nullptr;
  // Opening one's own handle is refused, as CUDA does.
  CHECK_CUDA(cudaIpcOpenMemHandle(&mapped, memory_handle, cudaIpcMemLazyEnablePeerAccess),
             cudaErrorDeviceUninitialized);

  cudaEvent_t plain, shared;
  CUDA_OK(cudaEventCreateWithFlags(&plain, cudaEventDisableTiming));
  CUDA_OK(cudaEventCreateWithFlags(&shared, cudaEventDisableTiming | cudaEventInterprocess));
  cudaIpcEventHandle_t event_handle;
  CHECK_CUDA(cudaIpcGetEventHandle(&event_handle, plain), cudaErrorInvalidResourceHandle);
  CUDA_OK(cudaIpcGetEventHandle(&event_handle, shared));
  cudaEvent_t reopened;
  CHECK_CUDA(cudaIpcOpenEventHandle(&reopened, event_handle), cudaErrorDeviceUninitialized);

  // The second quarter is written behind a held stream, then the shared event recorded.
  Gate gate;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  gate.hold(stream);
  CUDA_OK(cudaMemsetAsync(buffer + kQuarter, 0xb2, kQuarter, stream));
  CUDA_OK(cudaEventRecord(shared, stream));

  int notify[2];
  CHECK(pipe(notify) == 0);
  const std::string memory_hex = to_hex(memory_handle);
  const std::string event_hex = to_hex(event_handle);
  const pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    dup2(notify[1], kNotifyFd);
    execl(self, self, "ipc-child", memory_hex.c_str(), event_hex.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  close(notify[1]);
  char seen;
  CHECK(read(notify[0], &seen, 1) == 1);
  close(notify[0]);
  gate.open();
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The child wrote the third quarter through its mapping.
  const std::vector<unsigned char> after = host_copy(buffer, kBytes);
  CHECK(after[0] == 0xa1 && after[kQuarter] == 0xb2 && after[2 * kQuarter] == 0xc3 && after[3 * kQuarter] == 0xa1);

  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaEventDestroy(plain));
  CUDA_OK(cudaEventDestroy(shared));
  CUDA_OK(cudaFree(buffer));
}

int ipc_child(const char *memory_hex, const char *event_hex) {
  unsigned char *buffer = nullptr;
  CHECK_CUDA(cudaIpcOpenMemHandle(reinterpret_cast<void **>(&buffer), from_hex<cudaIpcMemHandle_t>(memory_hex), 0),
             cudaErrorInvalidValue);  // flags must be cudaIpcMemLazyEnablePeerAccess
  CUDA_OK(cudaIpcOpenMemHandle(reinterpret_cast<void **>(&buffer), from_hex<cudaIpcMemHandle_t>(memory_hex),
                               cudaIpcMemLazyEnablePeerAccess));
  // Opened twice, the same mapping, counted twice.
  unsigned char *again = nullptr;
  CUDA_OK(cudaIpcOpenMemHandle(reinterpret_cast<void **>(&again), from_hex<cudaIpcMemHandle_t>(memory_hex),
                               cudaIpcMemLazyEnablePeerAccess));
  CHECK(again == buffer && tcdouble_open_ipc_mappings() == 1);
  CUDA_OK(cudaIpcCloseMemHandle(again));
  CHECK(tcdouble_open_ipc_mappings() == 1);
  CHECK(host_copy(buffer, 1)[0] == 0xa1);

  cudaEvent_t event;
  CUDA_OK(cudaIpcOpenEventHandle(&event, from_hex<cudaIpcEventHandle_t>(event_hex)));
  CHECK_CUDA(cudaEventQuery(event), cudaErrorNotReady);  // the parent's stream is held until we say so
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned char seen = 0;
  CUDA_OK(cudaStreamWaitEvent(stream, event, 0));
  CUDA_OK(cudaMemcpyAsync(&seen, buffer + kQuarter, 1, cudaMemcpyDeviceToHost, stream));
  CHECK(write(kNotifyFd, "n", 1) == 1);
  close(kNotifyFd);
  CUDA_OK(cudaStreamSynchronize(stream));
  CHECK(seen == 0xb2);  // ordered after the parent's memset, through the event
  CUDA_OK(cudaMemsetAsync(buffer + 2 * kQuarter, 0xc3, kQuarter, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaEventDestroy(event));
  CUDA_OK(cudaIpcCloseMemHandle(buffer));
  CHECK_CUDA(cudaIpcCloseMemHandle(buffer), cudaErrorInvalidValue);
  expect_nothing_alive();
  return 0;
}
