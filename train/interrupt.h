// Ctrl-C during training (Note [Ctrl-C] in interrupt.cpp): the first finishes the step, writes a
// checkpoint and ends the run with exit 130; a second stops at once, without that checkpoint, and
// removes the checkpoint file being written, if any, so nothing half-written is left.
//
//   InterruptScope scope;                 // installs the handler for the training loop
//   if (interrupt_requested()) ...        // read once per step
//   { WritingCheckpoint w(file); save_checkpoint(...); }   // a second Ctrl-C removes file.partial
#pragma once
#include <filesystem>

namespace tf::train {

// Call first thing in main(), before any other thread starts (MPI's, OpenMP's): SIGINT, SIGTERM and
// SIGHUP are then blocked in this thread and every thread it starts, and received by one thread of
// their own that does nothing else, so that their handlers (and default actions) never run on a
// thread that is computing (Note [signals on one thread] in interrupt.cpp).
void receive_signals_on_own_thread();

// While it lives, SIGINT and SIGTERM (which mpirun sends its ranks when it is interrupted) request
// a stop instead of ending the process, and SIGHUP (the terminal or mpirun is gone) stops at once as
// a second Ctrl-C does; the previous handlers come back when it ends.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  using Handler = void (*)(int);
  Handler previous_int_, previous_term_, previous_hup_;
};

bool interrupt_requested();
int interrupt_signal();    // SIGINT or SIGTERM: the first one received (SIGINT after request_interrupt)
void request_interrupt();  // as a Ctrl-C would (another rank's, or a test's)

// Marks the checkpoint being written: a second Ctrl-C meanwhile removes "<file>.partial".
class WritingCheckpoint {
 public:
  explicit WritingCheckpoint(const std::filesystem::path& file);
  ~WritingCheckpoint();
  WritingCheckpoint(const WritingCheckpoint&) = delete;
  WritingCheckpoint& operator=(const WritingCheckpoint&) = delete;
};

}  // namespace tf::train
