// cudaStreamCreateWithFlags / Destroy / Synchronize.
#include "engine.h"
#include "tcdouble-control.h"

using namespace tcdouble;

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  if (pStream == nullptr || (flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) != 0) {
    return fail(cudaErrorInvalidValue);
  }
  const Stream &created = create_stream(call.s, current_device(), (flags & cudaStreamNonBlocking) != 0);
  *pStream = handle_of<cudaStream_t>(created.id);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (stream == nullptr || stream == cudaStreamLegacy) return fail(cudaErrorInvalidResourceHandle);
  Stream *found;
  if (cudaError_t error = find_stream(call.s, stream, &found)) return fail(error);
  // Like CUDA, returns at once; the stream finishes its work and is then dropped.
  found->destroyed = true;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  Stream *found;
  if (cudaError_t error = find_stream(call.s, stream, &found)) return fail(error);
  const StreamPoint tail{found->id, found->enqueued};
  return wait_until(call, "cudaStreamSynchronize", [&] { return reached(call.s, tail); })
             ? cudaSuccess
             : fail(cudaErrorLaunchTimeout);
}

int tcdouble_live_streams(void) {
  Call call;
  int live = 0;
  for (const auto &entry : call.s.streams) {
    if (!entry.second->legacy && !entry.second->destroyed) live++;
  }
  return live;
}
