// The op profiler's tables; see profile.h.
#include "framework/autograd/profile.h"

#include <algorithm>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

namespace tf::profile {

namespace {
struct Entry {
  int64_t calls = 0;
  double seconds = 0;
};
bool g_enabled = false;
thread_local bool g_muted = false;
Clock g_clock = Clock::wall;
int64_t g_last_mark_ns = 0;
std::map<std::pair<std::string, Phase>, Entry>& table() {
  static std::map<std::pair<std::string, Phase>, Entry> t;
  return t;
}
const char* phase_name(Phase p) {
  return p == Phase::forward ? "forward" : p == Phase::backward ? "backward" : "other";
}
}  // namespace

int64_t now_ns() {
  if (g_clock == Clock::cpu) {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void enable(bool on, Clock clock) {
  g_enabled = on;
  g_clock = clock;
  mark();
}
bool enabled() { return g_enabled && !g_muted; }
MuteThisThread::MuteThisThread() : previous_(g_muted) { g_muted = true; }
MuteThisThread::~MuteThisThread() { g_muted = previous_; }
void reset() { table().clear(); }
void mark() { g_last_mark_ns = now_ns(); }

void add(const char* name, Phase phase, double seconds) {
  Entry& e = table()[{name, phase}];
  ++e.calls;
  e.seconds += seconds;
}

void record_forward(const char* op_name) {
  const int64_t now = now_ns();
  add(op_name, Phase::forward, 1e-9 * static_cast<double>(now - g_last_mark_ns));
  g_last_mark_ns = now;
}

double total_seconds() {
  double total = 0;
  for (const auto& [key, e] : table()) total += e.seconds;
  return total;
}

std::string report() {
  std::vector<std::pair<std::pair<std::string, Phase>, Entry>> rows(table().begin(), table().end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  const double total = total_seconds();
  std::string out = "op                         phase        calls    seconds   share\n";
  char line[160];
  for (const auto& [key, e] : rows) {
    std::snprintf(line, sizeof line, "%-26s %-9s %9lld %10.3f  %5.1f%%\n", key.first.c_str(), phase_name(key.second),
                  static_cast<long long>(e.calls), e.seconds, total > 0 ? 100.0 * e.seconds / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-26s %-9s %9s %10.3f\n", "total", "", "", total);
  return out + line;
}

Scope::Scope(const char* name) : name_(name), start_ns_(enabled() ? now_ns() : 0) {}
Scope::~Scope() {
  if (!enabled() || start_ns_ == 0) return;
  add(name_, Phase::other, 1e-9 * static_cast<double>(now_ns() - start_ns_));
  mark();  // what follows a scope is not the next op's forward
}

}  // namespace tf::profile
