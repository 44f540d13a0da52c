/*
 * The core of the CUDA test double: process-global state under one mutex,
 * streams as FIFOs of operations, and the progress function that runs every
 * operation whose turn has come. Shared by the libcudart double (which owns
 * it) and the libnccl double (which links against it and queues its
 * collectives on the same streams).
 *
 * Handles given to the caller (streams, events, libraries, kernels, comms)
 * are ids, never addresses, so a stale or made-up handle is recognised as
 * such instead of being dereferenced.
 */
#ifndef TCDOUBLE_ENGINE_H
#define TCDOUBLE_ENGINE_H

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tcdouble {

/** A point in one stream's order: reached once `position` operations of that stream have completed. */
struct StreamPoint {
  uint64_t stream;
  uint64_t position;
};

/** Work queued on a stream. Runs, under the state lock, only at the head of its stream. */
class Op {
 public:
  virtual ~Op() = default;
  /** Called once the op is at its stream's head and every point in `after` is reached; true when finished. */
  virtual bool advance() = 0;
  /** What the op is and, when it cannot finish, what it waits for (the wait-limit report prints it). */
  virtual std::string describe() const = 0;
  /** Work on other streams this op is ordered after (legacy-stream ordering, stream waits, groups). */
  std::vector<StreamPoint> after;
};

/** An op that does nothing itself: it only orders its stream after the points in `after`. */
class OrderOp : public Op {
 public:
  explicit OrderOp(std::string what) : what_(std::move(what)) {}
  bool advance() override { return true; }
  std::string describe() const override { return what_; }

 private:
  std::string what_;
};

struct Stream {
  uint64_t id = 0;
  int device = 0;
  /** The legacy default stream (handle 0) of `device`. */
  bool legacy = false;
  /** cudaStreamNonBlocking: not ordered with the legacy default stream. */
  bool non_blocking = false;
  /** Destroyed by its owner: it drains what it holds, then goes away. */
  bool destroyed = false;
  std::deque<std::unique_ptr<Op>> queue;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
};

struct State {
  std::mutex mutex;
  /** Signalled whenever an operation is queued or completes. */
  std::condition_variable changed;
  /** By id; iterated in id order, so progress is deterministic. */
  std::map<uint64_t, std::unique_ptr<Stream>> streams;
  std::map<int, uint64_t> legacy_streams;
  std::map<std::string, int> injected_failures;
  std::vector<void (*)()> reset_hooks;
  /** Ops waiting on another process's IPC event: the worker polls while there are any. */
  int remote_waits = 0;
  bool worker_started = false;
  uint64_t next_id = 1;
};

using Lock = std::unique_lock<std::mutex>;

/** The one state of this process; never destroyed, so a thread still inside the double at exit is harmless. */
State &state();

/** Devices the double pretends to have: TENSORCOMM_CUDA_DOUBLE_DEVICES, default 4. */
int device_count();
int current_device();
void set_current_device(int device);

/** Handles are ids offset by this, far from 0 and the special stream handles 1 and 2. */
constexpr uintptr_t kHandleBase = 0x7cd000000000;

template <class Handle>
Handle handle_of(uint64_t id) {
  return reinterpret_cast<Handle>(kHandleBase + id);
}

/** The id a handle carries, or 0 (no object has id 0) for anything that is not a handle. */
inline uint64_t id_of(const void *handle) {
  const uintptr_t value = reinterpret_cast<uintptr_t>(handle);
  return value > kHandleBase ? value - kHandleBase : 0;
}

/**
 * One API call: holds the state lock for its whole duration and lets every
 * stream advance on the way in and on the way out, so results are visible as
 * soon as the call that made them possible returns.
 */
class Call {
 public:
  Call();
  ~Call();
  Call(const Call &) = delete;
  Call &operator=(const Call &) = delete;
  State &s;
  Lock lock;
  /** The code tcdouble_fail_next armed for `function` (consumed), or 0. */
  int injected_failure(const char *function);
};

/** The stream a handle names: 0 and cudaStreamLegacy are the legacy stream of `device`. */
cudaError_t find_stream(State &s, cudaStream_t handle, Stream **stream, int device = current_device());
Stream &create_stream(State &s, int device, bool non_blocking);

/** Queues `op` on `stream` behind the work it must follow; returns the point at which it has completed. */
StreamPoint enqueue(State &s, Stream &stream, std::unique_ptr<Op> op);
bool reached(const State &s, const StreamPoint &point);
bool all_reached(const State &s, const std::vector<StreamPoint> &points);
/** The points the work queued so far on `device`'s streams will have reached once done. */
std::vector<StreamPoint> device_tails(const State &s, int device);

/** Runs every operation that can run, until none can; true if anything happened. */
bool progress(State &s);

/**
 * Blocks (releasing the lock while waiting) until `done` holds, letting work
 * progress meanwhile. Gives up after TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS
 * (default 60000), printing what every stuck stream waits for, and returns false.
 */
bool wait_until(Call &call, const char *what, const std::function<bool()> &done);

/** Registers a function that drops a subsystem's tables (tcdouble_reset); runs under the lock. */
void on_reset(void (*hook)());
void reset_all(State &s);

/** Remembers a failing result for cudaGetLastError (cudaErrorNotReady is not an error) and returns it. */
cudaError_t fail(cudaError_t error);
cudaError_t take_last_error();

}  // namespace tcdouble

#endif  // TCDOUBLE_ENGINE_H
