// cudaIpcGetMemHandle / OpenMemHandle / CloseMemHandle and cudaIpcGetEventHandle / OpenEventHandle.
#include <sys/mman.h>
#include <unistd.h>

#include "engine.h"
#include "events.h"
#include "ipc-handle.h"
#include "memory.h"
#include "shared-memory.h"

using namespace tcdouble;

namespace {

/**
 * What CUDA does with a handle exported by the calling process itself:
 * cudaIpcOpen*Handle refuses it with "invalid device context".
 */
constexpr cudaError_t kOwnHandle = cudaErrorDeviceUninitialized;

}  // namespace

cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (handle == nullptr) return fail(cudaErrorInvalidValue);
  uintptr_t base;
  const Allocation *allocation = allocation_containing(devPtr, &base);
  if (allocation == nullptr) return fail(cudaErrorInvalidValue);
  *handle = encode_handle<cudaIpcMemHandle_t>(
      {kMemoryHandleMagic, getpid(), allocation->fd, allocation->device, allocation->size, allocation->id});
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  IpcHandleData data;
  const bool valid = devPtr != nullptr && flags == cudaIpcMemLazyEnablePeerAccess &&
                     decode_handle(handle, kMemoryHandleMagic, &data);
  if (!valid) return fail(cudaErrorInvalidValue);
  if (data.pid == getpid()) return fail(kOwnHandle);
  Memory &m = memory();
  // Opening a handle again hands back the same mapping, counted.
  for (auto &entry : m.mappings) {
    if (entry.second.pid == data.pid && entry.second.allocation == data.object) {
      entry.second.references++;
      *devPtr = reinterpret_cast<void *>(entry.first);
      return cudaSuccess;
    }
  }
  void *base = map_peer_shared(data.pid, data.fd, memfd_name("memory", data.pid, data.object), data.size);
  if (base == nullptr) return fail(cudaErrorMapBufferObjectFailed);
  m.mappings.emplace(reinterpret_cast<uintptr_t>(base), IpcMapping{data.pid, data.object, data.size, 1});
  *devPtr = base;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void *devPtr) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  Memory &m = memory();
  auto it = m.mappings.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == m.mappings.end()) return fail(cudaErrorInvalidValue);
  if (--it->second.references == 0) {
    munmap(devPtr, it->second.size);
    m.mappings.erase(it);
  }
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (handle == nullptr) return fail(cudaErrorInvalidValue);
  const Event *found = find_event(event);
  if (found == nullptr || (found->flags & cudaEventInterprocess) == 0) return fail(cudaErrorInvalidResourceHandle);
  *handle = found->handle;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  IpcHandleData data;
  if (event == nullptr || !decode_handle(handle, kEventHandleMagic, &data)) return fail(cudaErrorInvalidValue);
  if (data.pid == getpid()) return fail(kOwnHandle);
  void *page = map_peer_shared(data.pid, data.fd, memfd_name("event", data.pid, data.object), data.size);
  if (page == nullptr) return fail(cudaErrorMapBufferObjectFailed);
  Event opened;
  // An opened event behaves like a local one made with cudaEventDisableTiming.
  opened.flags = cudaEventDisableTiming | cudaEventInterprocess;
  const size_t size = data.size;
  opened.counters = std::shared_ptr<EventCounters>(static_cast<EventCounters *>(page),
                                                   [size](EventCounters *counters) { munmap(counters, size); });
  opened.handle = handle;
  *event = add_event(call.s.next_id++, std::move(opened));
  return cudaSuccess;
}
