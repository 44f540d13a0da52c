// Stream order, events, cudaErrorNotReady, legacy default stream semantics, synchronization.
#include <atomic>
#include <thread>

#include "check.h"

namespace {

cudaEvent_t new_event() {
  cudaEvent_t event;
  CUDA_OK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

cudaStream_t new_stream(unsigned flags) {
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, flags));
  return stream;
}

/** Work queued behind a held stream runs in order, and only once the stream is released. */
void fifo_order() {
  Gate gate;
  cudaStream_t stream = new_stream(cudaStreamNonBlocking);
  cudaEvent_t done = new_event();
  const std::vector<unsigned char> source(64, 0x22);
  std::vector<unsigned char> target(64, 0x00);
  unsigned char *buffer = device_copy(std::vector<unsigned char>(64, 0x00));
  gate.hold(stream);
  CUDA_OK(cudaMemcpyAsync(buffer, source.data(), 64, cudaMemcpyHostToDevice, stream));
  CUDA_OK(cudaMemsetAsync(buffer + 32, 0x11, 32, stream));
  CUDA_OK(cudaMemcpyAsync(target.data(), buffer, 64, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaEventRecord(done, stream));
  CHECK_CUDA(cudaEventQuery(done), cudaErrorNotReady);
  CHECK(cudaGetLastError() == cudaSuccess);  // not ready is not an error
  CHECK(target[0] == 0x00);
  gate.open();
  expect_completes(done);
  CHECK(target[0] == 0x22 && target[31] == 0x22 && target[32] == 0x11 && target[63] == 0x11);
  CUDA_OK(cudaEventDestroy(done));
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(buffer));
}

/** cudaStreamWaitEvent orders one stream after work recorded on another. */
void cross_stream_wait() {
  Gate gate;
  cudaStream_t producer = new_stream(cudaStreamNonBlocking);
  cudaStream_t consumer = new_stream(cudaStreamNonBlocking);
  cudaEvent_t produced = new_event();
  cudaEvent_t consumed = new_event();
  const std::vector<int> source = {7, 8, 9};
  std::vector<int> seen(3, 0);
  int *buffer = device_copy(std::vector<int>(3, 0));
  gate.hold(producer);
  CUDA_OK(cudaMemcpyAsync(buffer, source.data(), sizeof(int) * 3, cudaMemcpyDefault, producer));
  CUDA_OK(cudaEventRecord(produced, producer));
  CUDA_OK(cudaStreamWaitEvent(consumer, produced, 0));
  CUDA_OK(cudaMemcpyAsync(seen.data(), buffer, sizeof(int) * 3, cudaMemcpyDefault, consumer));
  CUDA_OK(cudaEventRecord(consumed, consumer));
  CHECK_CUDA(cudaEventQuery(produced), cudaErrorNotReady);
  CHECK_CUDA(cudaEventQuery(consumed), cudaErrorNotReady);
  gate.open();
  expect_completes(consumed);
  CHECK(seen == source);
  // Re-recording: the event is about its latest record.
  CUDA_OK(cudaEventRecord(produced, consumer));
  expect_completes(produced);
  for (cudaEvent_t event : {produced, consumed}) CUDA_OK(cudaEventDestroy(event));
  for (cudaStream_t stream : {producer, consumer}) CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(buffer));
}

/**
 * The legacy default stream waits for work queued before on the device's
 * blocking streams, and they for it; cudaStreamNonBlocking streams are not
 * ordered with it.
 */
void legacy_stream() {
  Gate gate;
  cudaStream_t blocking = new_stream(cudaStreamDefault);
  cudaStream_t later_blocking = new_stream(cudaStreamDefault);
  cudaStream_t non_blocking = new_stream(cudaStreamNonBlocking);
  cudaEvent_t on_legacy = new_event();
  cudaEvent_t after_legacy = new_event();
  cudaEvent_t independent = new_event();
  gate.hold(blocking);
  CUDA_OK(cudaEventRecord(on_legacy, nullptr));
  CUDA_OK(cudaEventRecord(after_legacy, later_blocking));
  CUDA_OK(cudaEventRecord(independent, non_blocking));
  expect_completes(independent);
  CHECK_CUDA(cudaEventQuery(on_legacy), cudaErrorNotReady);
  CHECK_CUDA(cudaEventQuery(after_legacy), cudaErrorNotReady);
  gate.open();
  expect_completes(on_legacy);
  expect_completes(after_legacy);
  for (cudaEvent_t event : {on_legacy, after_legacy, independent}) CUDA_OK(cudaEventDestroy(event));
  for (cudaStream_t stream : {blocking, later_blocking, non_blocking}) CUDA_OK(cudaStreamDestroy(stream));
}

/** A blocking call returns only once the work it waits for is done, however long another thread takes. */
void synchronize(const std::function<cudaError_t(cudaStream_t, cudaEvent_t)> &wait) {
  Gate gate;
  cudaStream_t stream = new_stream(cudaStreamNonBlocking);
  cudaEvent_t done = new_event();
  gate.hold(stream);
  CUDA_OK(cudaEventRecord(done, stream));
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    CUDA_OK(wait(stream, done));
    // Nothing the wait covered may still be pending when it returns.
    CUDA_OK(cudaEventQuery(done));
    returned = true;
  });
  CHECK(!returned);
  gate.open();
  waiter.join();
  CHECK(returned);
  CUDA_OK(cudaEventDestroy(done));
  CUDA_OK(cudaStreamDestroy(stream));
}

/** A destroyed stream still runs what it holds. */
void destroy_busy_stream() {
  Gate gate;
  cudaStream_t stream = new_stream(cudaStreamNonBlocking);
  cudaEvent_t done = new_event();
  gate.hold(stream);
  CUDA_OK(cudaEventRecord(done, stream));
  CUDA_OK(cudaStreamDestroy(stream));
  CHECK(tcdouble_live_streams() == 1);  // the gate's own
  gate.open();
  expect_completes(done);
  CUDA_OK(cudaEventDestroy(done));
}

}  // namespace

void test_streams() {
  fifo_order();
  cross_stream_wait();
  legacy_stream();
  synchronize([](cudaStream_t stream, cudaEvent_t) { return cudaStreamSynchronize(stream); });
  synchronize([](cudaStream_t, cudaEvent_t event) { return cudaEventSynchronize(event); });
  synchronize([](cudaStream_t, cudaEvent_t) { return cudaDeviceSynchronize(); });
  destroy_busy_stream();
}
