#include "engine.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace tcdouble {
namespace {

using Clock = std::chrono::steady_clock;

thread_local int thread_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

long parse_env(const char *name, long fallback, long max) {
  const char *text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char *end = nullptr;
  const long value = strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > max) {
    fprintf(stderr, "tensorcomm CUDA double: %s=%s is not an integer in [0, %ld]; using %ld\n", name, text, max,
            fallback);
    return fallback;
  }
  return value;
}

/**
 * Runs work that no API call would otherwise run: what became runnable while
 * every thread was busy elsewhere, and waits on IPC events, which another
 * process completes without telling this one (so those are polled).
 */
void worker_main() {
  State &s = state();
  Lock lock(s.mutex);
  for (;;) {
    progress(s);
    if (s.remote_waits > 0) {
      s.changed.wait_for(lock, std::chrono::milliseconds(1));
    } else {
      s.changed.wait(lock);
    }
  }
}

void report_stuck(const State &s, const char *what, long limit_ms) {
  fprintf(stderr,
          "tensorcomm CUDA double: %s gave up after %ld ms (TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS); "
          "streams still holding work:\n",
          what, limit_ms);
  for (const auto &entry : s.streams) {
    const Stream &stream = *entry.second;
    if (stream.queue.empty()) continue;
    fprintf(stderr, "  stream %llu (device %d%s): %s%s\n", static_cast<unsigned long long>(stream.id),
            stream.device, stream.legacy ? ", legacy default stream" : "",
            stream.queue.front()->describe().c_str(),
            stream.queue.size() > 1 ? (", then " + std::to_string(stream.queue.size() - 1) + " more").c_str() : "");
  }
}

}  // namespace

State &state() {
  static State *s = new State();
  return *s;
}

Call::Call() : s(state()), lock(s.mutex) { progress(s); }

Call::~Call() { progress(s); }

int Call::injected_failure(const char *function) {
  auto it = s.injected_failures.find(function);
  if (it == s.injected_failures.end()) return 0;
  const int code = it->second;
  s.injected_failures.erase(it);
  return code;
}

Stream &create_stream(State &s, int device, bool non_blocking) {
  auto stream = std::make_unique<Stream>();
  stream->id = s.next_id++;
  stream->device = device;
  stream->non_blocking = non_blocking;
  Stream &created = *stream;
  s.streams.emplace(created.id, std::move(stream));
  return created;
}

cudaError_t find_stream(State &s, cudaStream_t handle, Stream **stream, int device) {
  if (handle == nullptr || handle == cudaStreamLegacy) {
    auto legacy = s.legacy_streams.find(device);
    if (legacy == s.legacy_streams.end()) {
      Stream &created = create_stream(s, device, false);
      created.legacy = true;
      legacy = s.legacy_streams.emplace(device, created.id).first;
    }
    *stream = s.streams.at(legacy->second).get();
    return cudaSuccess;
  }
  // The per-thread default stream is real CUDA but unused by tensorcomm; the double says so rather than guess.
  if (handle == cudaStreamPerThread) return cudaErrorNotSupported;
  auto found = s.streams.find(id_of(handle));
  if (found == s.streams.end() || found->second->destroyed || found->second->legacy) {
    return cudaErrorInvalidResourceHandle;
  }
  *stream = found->second.get();
  return cudaSuccess;
}

StreamPoint enqueue(State &s, Stream &stream, std::unique_ptr<Op> op) {
  // The legacy stream waits for the work already queued on the device's blocking streams, and they for it.
  for (const auto &entry : s.streams) {
    const Stream &other = *entry.second;
    if (&other == &stream || other.device != stream.device || other.non_blocking) continue;
    if (other.enqueued == other.completed) continue;
    if (stream.legacy || (other.legacy && !stream.non_blocking)) op->after.push_back({other.id, other.enqueued});
  }
  stream.queue.push_back(std::move(op));
  stream.enqueued++;
  if (!s.worker_started) {
    std::thread(worker_main).detach();
    s.worker_started = true;
  }
  s.changed.notify_all();
  return {stream.id, stream.enqueued};
}

bool reached(const State &s, const StreamPoint &point) {
  auto it = s.streams.find(point.stream);
  // A stream is only ever dropped once drained, so a missing one has reached every point.
  return it == s.streams.end() || it->second->completed >= point.position;
}

bool all_reached(const State &s, const std::vector<StreamPoint> &points) {
  for (const StreamPoint &point : points) {
    if (!reached(s, point)) return false;
  }
  return true;
}

std::vector<StreamPoint> device_tails(const State &s, int device) {
  std::vector<StreamPoint> tails;
  for (const auto &entry : s.streams) {
    const Stream &stream = *entry.second;
    if (stream.device == device && stream.enqueued > stream.completed) {
      tails.push_back({stream.id, stream.enqueued});
    }
  }
  return tails;
}

bool progress(State &s) {
  bool any = false;
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &entry : s.streams) {
      Stream &stream = *entry.second;
      while (!stream.queue.empty()) {
        Op &op = *stream.queue.front();
        if (!all_reached(s, op.after) || !op.advance()) break;
        stream.queue.pop_front();
        stream.completed++;
        changed = true;
      }
    }
    any = any || changed;
  }
  for (auto it = s.streams.begin(); it != s.streams.end();) {
    it = it->second->destroyed && it->second->queue.empty() ? s.streams.erase(it) : std::next(it);
  }
  if (any) s.changed.notify_all();
  return any;
}

bool wait_until(Call &call, const char *what, const std::function<bool()> &done) {
  const long limit_ms = parse_env("TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS", 60000, 24L * 3600 * 1000);
  const auto deadline = Clock::now() + std::chrono::milliseconds(limit_ms);
  progress(call.s);
  while (!done()) {
    if (Clock::now() >= deadline) {
      report_stuck(call.s, what, limit_ms);
      return false;
    }
    // Short sleeps: another process completing an IPC event signals nothing here.
    call.s.changed.wait_for(call.lock, std::chrono::milliseconds(2));
    progress(call.s);
  }
  return true;
}

void on_reset(void (*hook)()) {
  Lock lock(state().mutex);
  state().reset_hooks.push_back(hook);
}

void reset_all(State &s) {
  for (auto hook : s.reset_hooks) hook();
  s.streams.clear();
  s.legacy_streams.clear();
  s.injected_failures.clear();
  s.changed.notify_all();
}

int device_count() { return static_cast<int>(parse_env("TENSORCOMM_CUDA_DOUBLE_DEVICES", 4, 1024)); }

int current_device() { return thread_device; }

void set_current_device(int device) { thread_device = device; }

cudaError_t fail(cudaError_t error) {
  if (error != cudaSuccess && error != cudaErrorNotReady) last_error = error;
  return error;
}

cudaError_t take_last_error() {
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

}  // namespace tcdouble
