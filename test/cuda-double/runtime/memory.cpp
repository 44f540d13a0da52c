// cudaMalloc / cudaFree / cudaMemcpy / cudaMemcpyAsync / cudaMemsetAsync on memfd-backed host memory.
#include "memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "engine.h"
#include "shared-memory.h"
#include "tcdouble-control.h"

namespace tcdouble {
namespace {

/** The entry of `table` whose range holds [pointer, pointer + bytes), or table.end(). */
template <class Table>
typename Table::const_iterator containing(const Table &table, const void *pointer, size_t bytes) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  auto it = table.upper_bound(address);
  if (it == table.begin()) return table.end();
  --it;
  return address + bytes <= it->first + it->second.size ? it : table.end();
}

bool is_device_memory(const void *pointer, size_t bytes) {
  const Memory &m = memory();
  return containing(m.allocations, pointer, bytes) != m.allocations.end() ||
         containing(m.mappings, pointer, bytes) != m.mappings.end();
}

class CopyOp : public Op {
 public:
  CopyOp(void *target, const void *source, size_t bytes) : target_(target), source_(source), bytes_(bytes) {}
  bool advance() override {
    memmove(target_, source_, bytes_);
    return true;
  }
  std::string describe() const override { return "copy of " + std::to_string(bytes_) + " bytes"; }

 private:
  void *target_;
  const void *source_;
  size_t bytes_;
};

class SetOp : public Op {
 public:
  SetOp(void *target, int value, size_t bytes) : target_(target), value_(value), bytes_(bytes) {}
  bool advance() override {
    memset(target_, value_, bytes_);
    return true;
  }
  std::string describe() const override { return "memset of " + std::to_string(bytes_) + " bytes"; }

 private:
  void *target_;
  int value_;
  size_t bytes_;
};

cudaError_t check_copy(const void *target, const void *source, size_t bytes, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if (bytes > 0 && (target == nullptr || source == nullptr)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

void drop_all() {
  Memory &m = memory();
  for (const auto &entry : m.allocations) {
    munmap(reinterpret_cast<void *>(entry.first), entry.second.size);
    close(entry.second.fd);
  }
  for (const auto &entry : m.mappings) munmap(reinterpret_cast<void *>(entry.first), entry.second.size);
  m.allocations.clear();
  m.mappings.clear();
}

const bool registered = (on_reset(drop_all), true);

}  // namespace

Memory &memory() {
  static Memory *m = new Memory();
  return *m;
}

const Allocation *allocation_containing(const void *pointer, uintptr_t *base) {
  const Memory &m = memory();
  auto it = containing(m.allocations, pointer, 1);
  if (it == m.allocations.end()) return nullptr;
  *base = it->first;
  return &it->second;
}

}  // namespace tcdouble

using namespace tcdouble;

cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
  if (size == 0) {
    *devPtr = nullptr;
    return cudaSuccess;
  }
  Memory &m = memory();
  const uint64_t id = m.next_allocation++;
  int fd;
  void *base;
  if (!create_shared(memfd_name("memory", getpid(), id), size, &fd, &base)) return fail(cudaErrorMemoryAllocation);
  m.allocations.emplace(reinterpret_cast<uintptr_t>(base), Allocation{id, size, fd, current_device()});
  *devPtr = base;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFree(void *devPtr) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  if (devPtr == nullptr) return cudaSuccess;
  Memory &m = memory();
  auto it = m.allocations.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == m.allocations.end()) return fail(cudaErrorInvalidValue);
  // cudaFree synchronizes with the device's work, which may still use the memory.
  const std::vector<StreamPoint> tails = device_tails(call.s, it->second.device);
  if (!wait_until(call, "cudaFree", [&] { return all_reached(call.s, tails); })) {
    return fail(cudaErrorLaunchTimeout);
  }
  it = m.allocations.find(reinterpret_cast<uintptr_t>(devPtr));  // another thread may have freed it meanwhile
  if (it == m.allocations.end()) return fail(cudaErrorInvalidValue);
  munmap(devPtr, it->second.size);
  close(it->second.fd);
  m.allocations.erase(it);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  if (cudaError_t error = check_copy(dst, src, count, kind)) return fail(error);
  if (count == 0) return cudaSuccess;
  // Synchronous, on the legacy default stream: after the work queued there and on the blocking streams.
  Stream *legacy;
  find_stream(call.s, nullptr, &legacy);
  const StreamPoint done = enqueue(call.s, *legacy, std::make_unique<CopyOp>(dst, src, count));
  return wait_until(call, "cudaMemcpy", [&] { return reached(call.s, done); }) ? cudaSuccess
                                                                               : fail(cudaErrorLaunchTimeout);
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  if (cudaError_t error = check_copy(dst, src, count, kind)) return fail(error);
  Stream *target;
  if (cudaError_t error = find_stream(call.s, stream, &target)) return fail(error);
  if (count > 0) enqueue(call.s, *target, std::make_unique<CopyOp>(dst, src, count));
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  if (count > 0 && !is_device_memory(devPtr, count)) return fail(cudaErrorInvalidValue);
  Stream *target;
  if (cudaError_t error = find_stream(call.s, stream, &target)) return fail(error);
  if (count > 0) enqueue(call.s, *target, std::make_unique<SetOp>(devPtr, value, count));
  return cudaSuccess;
}

int tcdouble_live_allocations(void) {
  Call call;
  return static_cast<int>(memory().allocations.size());
}

int tcdouble_open_ipc_mappings(void) {
  Call call;
  return static_cast<int>(memory().mappings.size());
}
