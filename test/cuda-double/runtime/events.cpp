// cudaEventCreateWithFlags / Record / Query / Synchronize / Destroy and cudaStreamWaitEvent.
#include "events.h"

#include <sys/mman.h>
#include <unistd.h>

#include "ipc-handle.h"
#include "shared-memory.h"
#include "tcdouble-control.h"

namespace tcdouble {
namespace {

constexpr size_t kEventPageBytes = 4096;
constexpr unsigned kEventFlags = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;

class RecordOp : public Op {
 public:
  RecordOp(std::shared_ptr<EventCounters> counters, uint64_t generation)
      : counters_(std::move(counters)), generation_(generation) {}
  bool advance() override {
    // A later record may finish first on another stream; the count never goes back.
    uint64_t seen = counters_->completed.load();
    while (seen < generation_ && !counters_->completed.compare_exchange_weak(seen, generation_)) {
    }
    return true;
  }
  std::string describe() const override { return "event record #" + std::to_string(generation_); }

 private:
  std::shared_ptr<EventCounters> counters_;
  uint64_t generation_;
};

/** A wait for a record another process made: nothing here signals it, so the worker polls. */
class RemoteWaitOp : public Op {
 public:
  RemoteWaitOp(std::shared_ptr<EventCounters> counters, uint64_t generation)
      : counters_(std::move(counters)), generation_(generation) {
    state().remote_waits++;
  }
  ~RemoteWaitOp() override { state().remote_waits--; }
  bool advance() override { return counters_->completed.load() >= generation_; }
  std::string describe() const override {
    return "wait for IPC event record #" + std::to_string(generation_) + " made by another process";
  }

 private:
  std::shared_ptr<EventCounters> counters_;
  uint64_t generation_;
};

bool create_interprocess(Event *event, uint64_t id) {
  int fd;
  void *page;
  if (!create_shared(memfd_name("event", getpid(), id), kEventPageBytes, &fd, &page)) return false;
  event->counters = std::shared_ptr<EventCounters>(new (page) EventCounters(), [fd](EventCounters *counters) {
    munmap(counters, kEventPageBytes);
    close(fd);
  });
  event->handle = encode_handle<cudaIpcEventHandle_t>(
      {kEventHandleMagic, getpid(), fd, current_device(), kEventPageBytes, id});
  return true;
}

bool complete(const Event &event) { return event.counters->completed.load() >= event.counters->recorded.load(); }

void drop_all() { events().clear(); }

const bool registered = (on_reset(drop_all), true);

}  // namespace

std::map<uint64_t, Event> &events() {
  static auto *table = new std::map<uint64_t, Event>();
  return *table;
}

Event *find_event(cudaEvent_t handle) {
  auto it = events().find(id_of(handle));
  return it == events().end() ? nullptr : &it->second;
}

cudaEvent_t add_event(uint64_t id, Event event) {
  events().emplace(id, std::move(event));
  return handle_of<cudaEvent_t>(id);
}

}  // namespace tcdouble

using namespace tcdouble;

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  if (event == nullptr || (flags & ~kEventFlags) != 0) return fail(cudaErrorInvalidValue);
  const bool interprocess = (flags & cudaEventInterprocess) != 0;
  if (interprocess && (flags & cudaEventDisableTiming) == 0) return fail(cudaErrorInvalidValue);
  const uint64_t id = call.s.next_id++;
  Event created;
  created.flags = flags;
  if (interprocess) {
    if (!create_interprocess(&created, id)) return fail(cudaErrorMemoryAllocation);
  } else {
    created.counters = std::make_shared<EventCounters>();
  }
  *event = add_event(id, std::move(created));
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  Event *found = find_event(event);
  if (found == nullptr) return fail(cudaErrorInvalidResourceHandle);
  Stream *target;
  if (cudaError_t error = find_stream(call.s, stream, &target)) return fail(error);
  const uint64_t generation = found->counters->recorded.fetch_add(1) + 1;
  found->local_generation = generation;
  found->local_point = enqueue(call.s, *target, std::make_unique<RecordOp>(found->counters, generation));
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  const Event *found = find_event(event);
  if (found == nullptr) return fail(cudaErrorInvalidResourceHandle);
  return complete(*found) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  const Event *found = find_event(event);
  if (found == nullptr) return fail(cudaErrorInvalidResourceHandle);
  // Waits for the record current now; the event may be destroyed or re-recorded meanwhile.
  const std::shared_ptr<EventCounters> counters = found->counters;
  const uint64_t generation = counters->recorded.load();
  const bool done = wait_until(call, "cudaEventSynchronize", [&] { return counters->completed.load() >= generation; });
  return done ? cudaSuccess : fail(cudaErrorLaunchTimeout);
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  // Queued records and waits hold the counters, so they finish as if the event were still there.
  if (events().erase(id_of(event)) == 0) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  Call call;
  if (int code = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(code));
  if ((flags & ~static_cast<unsigned>(cudaEventWaitExternal)) != 0) return fail(cudaErrorInvalidValue);
  const Event *found = find_event(event);
  if (found == nullptr) return fail(cudaErrorInvalidResourceHandle);
  Stream *target;
  if (cudaError_t error = find_stream(call.s, stream, &target)) return fail(error);
  const uint64_t generation = found->counters->recorded.load();
  // Never recorded, or already complete: nothing to wait for.
  if (generation == 0 || found->counters->completed.load() >= generation) return cudaSuccess;
  if (generation == found->local_generation) {
    auto wait = std::make_unique<OrderOp>("wait for an event recorded on stream " +
                                          std::to_string(found->local_point.stream));
    wait->after.push_back(found->local_point);
    enqueue(call.s, *target, std::move(wait));
  } else {
    enqueue(call.s, *target, std::make_unique<RemoteWaitOp>(found->counters, generation));
  }
  return cudaSuccess;
}

int tcdouble_live_events(void) {
  Call call;
  return static_cast<int>(events().size());
}
