#include "shared-memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tcdouble {

std::string memfd_name(const char *kind, int pid, uint64_t id) {
  return std::string("tcdouble-") + kind + "-" + std::to_string(pid) + "-" + std::to_string(id);
}

bool create_shared(const std::string &name, size_t size, int *fd, void **base) {
  const int created = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (created < 0) return false;
  void *mapped = MAP_FAILED;
  if (ftruncate(created, static_cast<off_t>(size)) == 0) {
    mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, created, 0);
  }
  if (mapped == MAP_FAILED) {
    close(created);
    return false;
  }
  *fd = created;
  *base = mapped;
  return true;
}

void *map_peer_shared(int pid, int fd, const std::string &name, size_t size) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int opened = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (opened < 0) return nullptr;
  // What we opened, not what the path named a moment ago: /proc shows a memfd as "/memfd:<name> (deleted)".
  char target[256];
  const std::string self = "/proc/self/fd/" + std::to_string(opened);
  const ssize_t length = readlink(self.c_str(), target, sizeof target - 1);
  const std::string expected = "/memfd:" + name + " (deleted)";
  struct stat info;
  void *mapped = MAP_FAILED;
  if (length >= 0 && std::string(target, static_cast<size_t>(length)) == expected && fstat(opened, &info) == 0 &&
      static_cast<size_t>(info.st_size) >= size) {
    mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, opened, 0);
  }
  close(opened);  // the mapping keeps the memory
  return mapped == MAP_FAILED ? nullptr : mapped;
}

}  // namespace tcdouble
