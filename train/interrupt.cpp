// Ctrl-C during training; see interrupt.h.
//
// Note [Ctrl-C]
// ~~~~~~~~~~~~~
// The first SIGINT sets a flag the training loop reads after each step: it finishes the step, logs
// it, writes a checkpoint and ends with exit 130 (128 + SIGINT, what a shell reports for a program
// Ctrl-C stopped; 143 after SIGTERM), so that a script can tell a stopped run from a finished one. Writing a large checkpoint takes seconds, and a user who presses Ctrl-C again
// wants out now: the second signal ends the process at once (same exit code), without that checkpoint.
// If it lands while a checkpoint is being written, the handler first removes the "<file>.partial"
// being written (H5Writer renames it only when complete), so the folder holds only complete
// checkpoints. The steps logged after the newest complete checkpoint are then records of steps no
// checkpoint holds: the next --resume moves them aside before training them again (Note [resuming
// from an earlier step] in run_history.cpp), so metrics.jsonl never holds a step twice.
// Under mpirun, an interrupted mpirun sends SIGTERM to its ranks; SIGTERM is handled like SIGINT
// so that every rank finishes the step and the ranks agree on the checkpoint (train/trainer.cpp).
// Open MPI's mpirun (4.1) sends SIGKILL 1 s later (odls_base_sigkill_timeout): a run whose step and
// checkpoint take longer keeps only its newest interval checkpoint (docs/distributed.md).
// The handler uses only async-signal-safe calls (write, unlink, _exit) and lock-free atomics.
//
// Note [signals on one thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The kernel runs a handler on the stack of whichever thread the signal lands on, below its stack
// pointer. oneDNN 2.6's JIT sgemm (Debian 12's libdnnl2 2.6.3) keeps data below the stack pointer,
// so a handler that runs while it computes overwrites that data. Found by the two-rank soak
// (tests/dist/soak_test.cpp): the step a Ctrl-C landed in had a wrong gradient (grad_norm 0.5615
// for 0.5623, the loss equal), and now and then glibc stopped the run with "corrupted size vs.
// prev_size" inside dnnl_primitive_execute. A program calling dnnl_sgemm (1024 x 64 x 256, one
// thread) in a loop under a 53 us timer signal aborts the same way within 1,000 calls; with the
// handler on an alternate stack it ran 3 x 1,000 calls clean. So the signals that have handlers are
// blocked in every thread but one, which only waits for them (receive_signals_on_own_thread); the
// handlers above run there. Blocked masks are inherited, so the threads MPI and OpenMP start later
// block them too; the HDF5 probe's child sets its own mask.
#include "train/interrupt.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <thread>

namespace tf::train {

namespace {

std::atomic<int> g_requests{0};
std::atomic<int> g_signal{0};  // the first signal's number
std::atomic<bool> g_writing{false};
char g_partial[4096];  // "<checkpoint>.partial" while g_writing

void say(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void on_interrupt(int signal) {
  int none = 0;
  g_signal.compare_exchange_strong(none, signal);
  if (g_requests.fetch_add(1) == 0) {
    say("\ninterrupt: finishing this step, then writing a checkpoint (Ctrl-C again stops at once, without it)\n");
    return;
  }
  if (g_writing.load()) ::unlink(g_partial);
  say("\nstopped at once: no checkpoint of this step; --resume continues from the newest complete one\n");
  ::_exit(128 + g_signal.load());
}

// SIGHUP: the terminal, or under mpirun mpirun itself, is gone (Note [orphaned ranks] in
// framework/dist/comm.cpp). Nothing is left to report to or to agree with: stop at once, as after a
// second Ctrl-C.
void on_hangup(int signal) {
  if (g_writing.load()) ::unlink(g_partial);
  say("\nhangup (mpirun or the terminal ended): stopped at once; --resume continues from the newest complete checkpoint\n");
  ::_exit(128 + signal);
}

}  // namespace

void receive_signals_on_own_thread() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, signal);
  ::pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  // A signal sent before the thread unblocks them waits, pending, until it does.
  std::thread([handled] {
    ::pthread_sigmask(SIG_UNBLOCK, &handled, nullptr);
    for (;;) ::pause();
  }).detach();
}

InterruptScope::InterruptScope() {
  g_requests = 0;
  g_signal = 0;
  previous_int_ = std::signal(SIGINT, on_interrupt);
  previous_term_ = std::signal(SIGTERM, on_interrupt);
  previous_hup_ = std::signal(SIGHUP, on_hangup);
}

InterruptScope::~InterruptScope() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
  std::signal(SIGHUP, previous_hup_);
}

bool interrupt_requested() { return g_requests.load() > 0; }
int interrupt_signal() { return g_signal.load() != 0 ? g_signal.load() : SIGINT; }
void request_interrupt() { g_requests.fetch_add(1); }

WritingCheckpoint::WritingCheckpoint(const std::filesystem::path& file) {
  const std::string partial = file.string() + ".partial";
  const size_t n = std::min(partial.size(), sizeof g_partial - 1);
  std::memcpy(g_partial, partial.data(), n);
  g_partial[n] = '\0';
  g_writing = true;
}

WritingCheckpoint::~WritingCheckpoint() { g_writing = false; }

}  // namespace tf::train
