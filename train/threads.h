// How many OpenMP threads a command runs, and how its waiting threads behave.
//
//   int main(int argc, char** argv) {
//     tf::train::apply_default_wait_policy(argv);   // first: may re-execute the program once
//     ...
//     const int threads = tf::train::configure_threads(recipe.train.threads);
#pragma once
#include <cstdint>
#include <string>

namespace tf::train {

// Sets OpenMP's thread count: `requested` when positive, else the physical cores; OMP_NUM_THREADS
// wins when set. Returns the count.
int configure_threads(int64_t requested);
// Decoding one sequence (sample) at the default thread count (Note [decode threads] in threads.cpp):
// one thread for a model below kParallelDecodeParameters parameters, else the physical cores that
// other processes leave free (at least one). A count the user chose (--threads, OMP_NUM_THREADS) is
// kept. Returns the count.
constexpr int64_t kParallelDecodeParameters = 300000;
int configure_decode_threads(int64_t parameters);
// Other processes' runnable threads now, from /proc/loadavg (0 when it cannot be read).
int other_runnable_threads();

// Where the thread count came from, for the banner: " (OMP_NUM_THREADS=4, overriding train.threads)",
// " (train.threads)", or "" (the physical cores).
std::string threads_origin(int64_t requested);

// The spin count before a waiting OpenMP thread sleeps that the program uses unless the user set
// OMP_WAIT_POLICY or GOMP_SPINCOUNT, by command (argv[1]): "10000" for sample, "1000" otherwise.
// Note [OpenMP wait policy] in threads.cpp.
const char* default_spin_count(const char* command);

// Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, sets GOMP_SPINCOUNT=default_spin_count(argv[1])
// and re-executes the program (/proc/self/exe) with the same arguments: libgomp reads the variable
// only when it loads. Returns (doing nothing) when either is set or the re-execution fails.
void apply_default_wait_policy(char** argv);

// One line for --dry-run: "GOMP_SPINCOUNT=1000 (tapeformer's default)", "OMP_WAIT_POLICY=PASSIVE
// (yours)", ...
std::string describe_wait_policy();

}  // namespace tf::train
