// Op profiler: where a training step's time goes, per op name, forward and backward apart.
//
// Forward time is measured without touching the ops: the tape notes the clock whenever it records
// a node, so an op's forward time is the time since the previous record (or since mark(), which
// the trainer calls before each forward pass). Backward time is each node's backward() call,
// gradient accumulation included. Code outside the tape (optimizer, data) uses ProfileScope.
// Off by default; when off, each hook costs one branch.
#pragma once
#include <cstdint>
#include <string>

namespace tf::profile {

enum class Phase { forward, backward, other };

// clock: wall time, or this process's CPU time (all threads; steadier on a busy machine).
enum class Clock { wall, cpu };
void enable(bool on, Clock clock = Clock::wall);
bool enabled();
void reset();
void mark();  // the next recorded op's forward time starts now
void add(const char* name, Phase phase, double seconds);
void record_forward(const char* op_name);  // called by the tape on record

// A table sorted by total time: name, phase, calls, seconds, share of the measured total.
std::string report();
double total_seconds();

// Times a named region of non-op work (optimizer step, batch assembly) while profiling is on.
class Scope {
 public:
  explicit Scope(const char* name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* name_;
  int64_t start_ns_;
};

int64_t now_ns();

// While alive, this thread's ops and scopes are not profiled (enabled() is false here). The tables
// are not shared between threads: a batch-split step (train/thread_split.h) profiles its first
// thread, whose ops stand for the others'.
class MuteThisThread {
 public:
  MuteThisThread();
  ~MuteThisThread();
  MuteThisThread(const MuteThisThread&) = delete;
  MuteThisThread& operator=(const MuteThisThread&) = delete;

 private:
  bool previous_;
};

}  // namespace tf::profile
