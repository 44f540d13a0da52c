// Devices: how many there are (TENSORCOMM_CUDA_DOUBLE_DEVICES), the calling thread's current one, and
// cudaDeviceSynchronize.
#include "engine.h"

using namespace tcdouble;

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = device_count();
  return *count == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  const int count = device_count();
  if (count == 0) return fail(cudaErrorNoDevice);
  if (device < 0 || device >= count) return fail(cudaErrorInvalidDevice);
  set_current_device(device);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDevice(int *device) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  const std::vector<StreamPoint> tails = device_tails(call.s, current_device());
  const bool done = wait_until(call, "cudaDeviceSynchronize", [&] { return all_reached(call.s, tails); });
  return done ? cudaSuccess : fail(cudaErrorLaunchTimeout);
}
