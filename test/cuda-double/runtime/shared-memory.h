/*
 * Device memory and IPC event state live in memfds, mapped MAP_SHARED, so
 * another process can map the same pages through /proc/<pid>/fd/<fd>: the
 * double's stand-in for CUDA IPC. memfds have no path, so nothing is ever
 * left on disk.
 */
#ifndef TCDOUBLE_SHARED_MEMORY_H
#define TCDOUBLE_SHARED_MEMORY_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace tcdouble {

/** The memfd name of object `id` of `kind` ("memory", "event") in process `pid`; /proc shows it. */
std::string memfd_name(const char *kind, int pid, uint64_t id);

/** A new memfd of `size` zero bytes mapped read-write; false (nothing left open) on failure. */
bool create_shared(const std::string &name, size_t size, int *fd, void **base);

/**
 * Maps `size` bytes of the memfd that process `pid` holds as `fd`, after
 * checking that it still is the memfd named `name` (fd numbers are reused);
 * nullptr when the process, the descriptor or the object is gone.
 */
void *map_peer_shared(int pid, int fd, const std::string &name, size_t size);

}  // namespace tcdouble

#endif  // TCDOUBLE_SHARED_MEMORY_H
