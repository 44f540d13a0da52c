// Events: a generation count per event. A record takes the next generation; the event is complete when the
// generation of its latest record has completed.
#ifndef TCDOUBLE_EVENTS_H
#define TCDOUBLE_EVENTS_H

#include <atomic>
#include <map>
#include <memory>

#include "engine.h"

namespace tcdouble {

/** In heap memory, or for interprocess events in a shared memfd page that every process using it maps. */
struct EventCounters {
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> completed{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "event counters are shared between processes");

struct Event {
  unsigned flags = 0;
  std::shared_ptr<EventCounters> counters;
  /** This process's latest record of the event: while it is the latest overall, waits order on it exactly. */
  uint64_t local_generation = 0;
  StreamPoint local_point{};
  /** Interprocess events: what cudaIpcGetEventHandle returns. */
  cudaIpcEventHandle_t handle{};
};

/** Guarded by the state lock. */
std::map<uint64_t, Event> &events();
Event *find_event(cudaEvent_t handle);
/** Registers `event` under `id` (from State::next_id) and returns its handle. */
cudaEvent_t add_event(uint64_t id, Event event);

}  // namespace tcdouble

#endif  // TCDOUBLE_EVENTS_H
