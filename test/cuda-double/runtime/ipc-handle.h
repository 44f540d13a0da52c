// What the double puts in a cudaIpcMemHandle_t / cudaIpcEventHandle_t (64 opaque bytes in real CUDA).
#ifndef TCDOUBLE_IPC_HANDLE_H
#define TCDOUBLE_IPC_HANDLE_H

#include <cstdint>
#include <cstring>

namespace tcdouble {

struct IpcHandleData {
  uint32_t magic;
  /** The exporting process, and the memfd it holds the object in. */
  int32_t pid;
  int32_t fd;
  int32_t device;
  uint64_t size;
  /** The allocation's or event's id in the exporting process; it is also in the memfd's name. */
  uint64_t object;
};

constexpr uint32_t kMemoryHandleMagic = 0x74634d48;  // "tcMH"
constexpr uint32_t kEventHandleMagic = 0x74634548;   // "tcEH"

template <class Handle>
Handle encode_handle(const IpcHandleData &data) {
  static_assert(sizeof(IpcHandleData) <= sizeof(Handle::reserved), "IPC handles are 64 bytes");
  Handle handle;
  memset(&handle, 0, sizeof handle);
  memcpy(handle.reserved, &data, sizeof data);
  return handle;
}

/** False when the bytes are not a handle of this kind (wrong magic). */
template <class Handle>
bool decode_handle(const Handle &handle, uint32_t magic, IpcHandleData *data) {
  memcpy(data, handle.reserved, sizeof *data);
  return data->magic == magic;
}

}  // namespace tcdouble

#endif  // TCDOUBLE_IPC_HANDLE_H
