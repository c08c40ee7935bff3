// Thread count and OpenMP wait policy; see threads.h.
//
// Note [OpenMP wait policy]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A libgomp thread that reaches a barrier, or the end of a parallel region, first spins for
// GOMP_SPINCOUNT turns and then sleeps on a futex: 300,000 turns by default (~3 ms), none with
// OMP_WAIT_POLICY=PASSIVE. On a quiet machine spinning makes the next fork and join cheap. When
// another busy process wants a core, the spinning thread takes CPU time from the thread it waits
// for: the demo recipe fell from 27k to 8k tokens/s beside one busy process. A short spin keeps
// most of the quiet speed and most of the contended one (bench/contention.py; docs/performance.md,
// "Threads on a shared machine"), so it is our default. Decoding one token is the exception: it runs
// ~25 short parallel regions (a gemv each) with serial work between them, and a thread that sleeps
// after 1000 turns must be woken through the kernel for every one: `sample` decoded 20% slower at
// 2 threads than with 10,000 turns, which was as fast as libgomp's 300,000 (bench_decode, config B,
// docs/performance.md), so `sample` spins 10,000. libgomp reads both variables once, when it
// loads, before main() runs: so we set the variable and re-execute ourselves once. A user who sets
// either variable keeps their choice.
//
// Note [decode threads]
// ~~~~~~~~~~~~~~~~~~~~~
// A token of batch-1 decoding is ~25 small parallel regions with serial work between them. Measured
// with `sample --tokens 500 --timing` on 2 cores (AVX-512 Xeon, docs/performance.md, "Decoding
// threads"): on a quiet machine 2 threads decode 0.98x as fast as 1 for a 112k-parameter model and
// 1.6-2.0x for 0.86M to 27M; beside one busy process 2 threads are 2-5x slower than 1 at every
// size, since each region waits for the thread the other process has descheduled. So the default
// is one thread below kParallelDecodeParameters (between the two sizes measured) and otherwise one
// per physical core that other processes leave free: /proc/loadavg's count of runnable threads
// (this one included), the least of five readings 2 ms apart, tells how many are busy now.
#include "train/threads.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>

namespace tf::train {

namespace {
// Physical cores: distinct (package, core) pairs in sysfs; all logical CPUs if that is unreadable.
int physical_cores() {
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0;; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package(base + "physical_package_id"), core(base + "core_id");
    if (!package || !core) break;
    std::string p, c;
    package >> p;
    core >> c;
    cores.emplace(p, c);
  }
  return cores.empty() ? omp_get_num_procs() : static_cast<int>(cores.size());
}
}  // namespace

namespace {
bool g_count_chosen = false;  // by --threads, train.threads or OMP_NUM_THREADS
}  // namespace

int configure_threads(int64_t requested) {
  g_count_chosen = requested > 0 || std::getenv("OMP_NUM_THREADS") != nullptr;
  if (std::getenv("OMP_NUM_THREADS") == nullptr) omp_set_num_threads(requested > 0 ? static_cast<int>(requested) : physical_cores());
  return omp_get_max_threads();
}

int other_runnable_threads() {
  int least = -1;
  for (int reading = 0; reading < 5; ++reading) {
    if (reading > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::ifstream loadavg("/proc/loadavg");
    double one, five, fifteen;
    int running = 0;
    if (!(loadavg >> one >> five >> fifteen >> running)) return 0;  // "0.52 0.58 0.59 3/250 12345"
    least = least < 0 ? running : std::min(least, running);
  }
  return std::max(0, least - 1);
}

int configure_decode_threads(int64_t parameters) {
  if (g_count_chosen) return omp_get_max_threads();
  const int threads = parameters < kParallelDecodeParameters ? 1 : std::max(1, physical_cores() - other_runnable_threads());
  omp_set_num_threads(threads);
  return threads;
}

std::string threads_origin(int64_t requested) {
  if (const char* env = std::getenv("OMP_NUM_THREADS"))
    return std::string(" (OMP_NUM_THREADS=") + env + (requested > 0 ? ", overriding train.threads)" : ")");
  return requested > 0 ? " (train.threads)" : "";
}

const char* default_spin_count(const char* command) {
  return command != nullptr && std::strcmp(command, "sample") == 0 ? "10000" : "1000";
}

void apply_default_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (::setenv("GOMP_SPINCOUNT", default_spin_count(argv[0] ? argv[1] : nullptr), 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("GOMP_SPINCOUNT");  // no /proc: run on with libgomp's own default, as before
}

std::string describe_wait_policy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spins = std::getenv("GOMP_SPINCOUNT");
  if (policy == nullptr && spins == nullptr) return "libgomp's default (GOMP_SPINCOUNT=300000)";
  std::string out;
  if (policy) out += std::string("OMP_WAIT_POLICY=") + policy;
  if (spins) out += (out.empty() ? "" : " ") + std::string("GOMP_SPINCOUNT=") + spins;
  const bool ours = policy == nullptr && std::strcmp(spins, default_spin_count("train")) == 0;
  return out + (ours ? " (tapeformer's default)" : " (yours)");
}

}  // namespace tf::train
