// Device memory: the allocations this process made, and the ones it mapped from other processes' IPC handles.
#ifndef TCDOUBLE_MEMORY_H
#define TCDOUBLE_MEMORY_H

#include <cstddef>
#include <cstdint>
#include <map>

namespace tcdouble {

struct Allocation {
  uint64_t id;
  size_t size;
  int fd;
  int device;
};

/** Another process's allocation mapped here by cudaIpcOpenMemHandle. */
struct IpcMapping {
  int pid;
  uint64_t allocation;
  size_t size;
  int references;
};

struct Memory {
  /** By base address. */
  std::map<uintptr_t, Allocation> allocations;
  std::map<uintptr_t, IpcMapping> mappings;
  uint64_t next_allocation = 1;
};

/** Guarded by the state lock. */
Memory &memory();

/** The allocation holding `pointer` (its base in *base), or nullptr. */
const Allocation *allocation_containing(const void *pointer, uintptr_t *base);

}  // namespace tcdouble

#endif  // TCDOUBLE_MEMORY_H
