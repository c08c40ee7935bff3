// The process group of a run: MPI's world when the program was started by mpirun, one process
// otherwise. Everything distributed in tapeformer (data-parallel gradients, ring attention) talks
// through this wrapper, so the rest of the code never includes mpi.h.
//
//   dist::Comm& comm = dist::Comm::world();     // MPI_Init on first use, only under mpirun
//   if (comm.size() > 1) comm.allreduce_sum(std::span<double>(&loss, 1));
//   dist::Request r = comm.iallreduce_sum(bucket.data(), bucket.size());   // non-blocking
//   ... more backward ...
//   r.wait();
//
// Without mpirun no MPI call is made at all: a single process keeps the exact behaviour (and the
// startup time) it had before MPI was linked. Only the thread that called world() first may call
// MPI (MPI_THREAD_FUNNELED); OpenMP threads inside kernels never do.
//
// Note [failing together]: MPI has no way to cancel a collective a rank is blocked in, so an
// error on one rank must not leave the others waiting. Two rules:
//   - Setup (recipe, data, checkpoint, run folder) runs on every rank under a SetupAgreement:
//     when it throws on any rank, every rank stops; only the lowest failing rank prints its
//     message, and all of them finalise MPI and exit 2 together. Bad input prints one error.
//   - An error after setup (a full disk on rank 0, a killed rank) exits that rank at once
//     without MPI_Finalize; mpirun then stops every other rank and says which rank failed.
// tools/main.cpp applies them through quiet() and exit_after_error().
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "framework/error.h"

namespace tf::dist {

// A non-blocking operation in flight. wait() completes it; test() advances MPI's progress engine
// (Open MPI progresses non-blocking collectives only inside MPI calls) and says whether it is done.
class Request {
 public:
  Request() = default;
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();  // waits for an operation still in flight: its buffers must outlive it
  bool active() const { return active_; }
  void wait();
  bool test();

 private:
  friend class Comm;
  alignas(8) unsigned char handle_[8] = {};  // an MPI_Request (an int or a pointer)
  bool active_ = false;
};

class Comm {
 public:
  static Comm& world();
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool mpi() const { return mpi_; }  // started by mpirun (even with one rank)

  // Collectives: every rank must call them in the same order with the same counts.
  template <class T> void allreduce_sum(std::span<T> values);  // T = float, double, int64_t
  int64_t allreduce_max(int64_t value);
  int64_t allreduce_min(int64_t value);
  void barrier();
  // Rank `root`'s bytes to every rank (resized on the others).
  void broadcast(std::string& bytes, int root = 0);
  template <class T> Request iallreduce_sum(T* values, int64_t count);
  // Every rank's `count` values, in rank order: received[r * count + i] = rank r's values[i].
  template <class T> Request iallgather(const T* values, int64_t count, T* received);
  template <class T> Request isend(const T* values, int64_t count, int to, int tag);
  template <class T> Request irecv(T* values, int64_t count, int from, int tag);

  // Note [failing together]. quiet(): another rank prints this error. exit_after_error: exits,
  // finalising MPI first when every rank agreed on the failure.
  bool quiet() const { return agreed_failure_rank_ >= 0 && agreed_failure_rank_ != rank_; }
  bool failure_agreed() const { return agreed_failure_rank_ >= 0; }
  [[noreturn]] void exit_after_error(int code);

 private:
  friend class SetupAgreement;
  Comm();
  int rank_ = 0, size_ = 1;
  bool mpi_ = false;
  int agreed_failure_rank_ = -1;  // the lowest rank whose setup failed, once every rank knows
};

// Thrown on the ranks whose own setup succeeded when another rank's failed (Note [failing
// together]); the program exits 2 without a message of its own.
class PeerFailed : public InputError {
 public:
  PeerFailed() : InputError("another rank failed; it printed the error") {}
};

// Brackets the setup of a run on every rank (Note [failing together]):
//
//   SetupAgreement setup(comm);
//   ... read the recipe, data, checkpoint; no collective calls in here ...
//   setup.succeeded();   // throws PeerFailed when another rank's setup threw
//
// When an exception leaves the scope before succeeded(), the destructor casts this rank's vote
// (failed) so that the others are released, and the exception goes on. A single process does
// nothing.
class SetupAgreement {
 public:
  explicit SetupAgreement(Comm& comm);
  ~SetupAgreement();
  void succeeded();
  // A vote in the middle of setup, where a later part depends on an earlier part of another rank
  // (the token shards rank 0 prepares): throws PeerFailed when a rank failed so far; the setup goes
  // on, and ends with succeeded() (or an exception) as before. Every rank calls it at the same point.
  void so_far();
  SetupAgreement(const SetupAgreement&) = delete;
  SetupAgreement& operator=(const SetupAgreement&) = delete;

 private:
  int64_t vote(bool failed);  // the lowest failing rank, or size() when none failed
  Comm& comm_;
  int exceptions_at_start_;
  bool voted_ = false;
};

// What an error message starts with: "rank R: " on several ranks, "" in a single process and for
// an error every rank agreed on (only one rank prints it).
std::string error_prefix(const Comm& comm);

}  // namespace tf::dist

