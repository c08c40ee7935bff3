// The MPI wrapper; see comm.h.
#include "framework/dist/comm.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

// The C API only: in C++, mpi.h would also declare Open MPI's deprecated C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>

namespace tf::dist {

namespace {

static_assert(sizeof(MPI_Request) <= 8, "Request keeps an MPI_Request in 8 bytes");

MPI_Request& handle(unsigned char* bytes) { return *reinterpret_cast<MPI_Request*>(bytes); }

template <class T>
MPI_Datatype datatype() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else {
    static_assert(std::is_same_v<T, int64_t>);
    return MPI_INT64_T;
  }
}

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(concat(call, " failed: ", std::string(text, static_cast<size_t>(length))));
}

int count_of(int64_t count) {
  TF_CHECK(count >= 0 && count <= INT32_MAX, "MPI message of ", count, " elements: more than MPI's int count");
  return static_cast<int>(count);
}

// Started by mpirun (Open MPI sets these in every rank's environment).
bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK"); }

}  // namespace

Request::Request(Request&& other) noexcept : active_(other.active_) {
  std::memcpy(handle_, other.handle_, sizeof(handle_));
  other.active_ = false;
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (active_) wait();
    std::memcpy(handle_, other.handle_, sizeof(handle_));
    active_ = other.active_;
    other.active_ = false;
  }
  return *this;
}

Request::~Request() {
  if (active_) MPI_Wait(&handle(handle_), MPI_STATUS_IGNORE);
}

void Request::wait() {
  if (!active_) return;
  active_ = false;
  check(MPI_Wait(&handle(handle_), MPI_STATUS_IGNORE), "MPI_Wait");
}

bool Request::test() {
  if (!active_) return true;
  int done = 0;
  check(MPI_Test(&handle(handle_), &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (done) active_ = false;
  return done != 0;
}

Comm::Comm() {
  if (!launched_by_mpirun()) return;
  // Note [orphaned ranks]: a second Ctrl-C makes mpirun (Open MPI 4.1) exit at once without ending
  // its ranks; a rank then waits for its peers or trains on (found by tests/dist/soak_test.cpp: a
  // rank outlived mpirun and went on beside the next run). The kernel sends SIGHUP when the parent,
  // mpirun (or a remote node's orted), dies; training ends at once on it, removing a half-written
  // checkpoint (train/interrupt.cpp), and elsewhere SIGHUP's default action ends the process.
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (::getppid() != parent) ::kill(::getpid(), SIGHUP);  // the parent died before the request (to the process: Note [signals on one thread])
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (check() turns them into exceptions) instead of aborting in MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  mpi_ = true;
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

Comm& Comm::world() {
  static Comm comm;
  return comm;
}

template <class T>
void Comm::allreduce_sum(std::span<T> values) {
  if (!mpi_) return;
  check(MPI_Allreduce(MPI_IN_PLACE, values.data(), count_of(static_cast<int64_t>(values.size())), datatype<T>(),
                      MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
}

int64_t Comm::allreduce_max(int64_t value) {
  if (mpi_) check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return value;
}

int64_t Comm::allreduce_min(int64_t value) {
  if (mpi_) check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  return value;
}

void Comm::barrier() {
  if (mpi_) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void Comm::broadcast(std::string& bytes, int root) {
  if (!mpi_) return;
  int64_t length = static_cast<int64_t>(bytes.size());
  check(MPI_Bcast(&length, 1, MPI_INT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
  bytes.resize(static_cast<size_t>(length));
  check(MPI_Bcast(bytes.data(), count_of(length), MPI_CHAR, root, MPI_COMM_WORLD), "MPI_Bcast");
}

template <class T>
Request Comm::iallreduce_sum(T* values, int64_t count) {
  Request r;
  if (!mpi_) return r;
  check(MPI_Iallreduce(MPI_IN_PLACE, values, count_of(count), datatype<T>(), MPI_SUM, MPI_COMM_WORLD,
                       &handle(r.handle_)),
        "MPI_Iallreduce");
  r.active_ = true;
  return r;
}

template <class T>
Request Comm::iallgather(const T* values, int64_t count, T* received) {
  Request r;
  if (!mpi_) {
    std::memcpy(received, values, static_cast<size_t>(count) * sizeof(T));
    return r;
  }
  check(MPI_Iallgather(values, count_of(count), datatype<T>(), received, count_of(count), datatype<T>(),
                       MPI_COMM_WORLD, &handle(r.handle_)),
        "MPI_Iallgather");
  r.active_ = true;
  return r;
}

template <class T>
Request Comm::isend(const T* values, int64_t count, int to, int tag) {
  TF_CHECK(mpi_, "isend needs MPI (start the program with mpirun)");
  Request r;
  check(MPI_Isend(values, count_of(count), datatype<T>(), to, tag, MPI_COMM_WORLD, &handle(r.handle_)), "MPI_Isend");
  r.active_ = true;
  return r;
}

template <class T>
Request Comm::irecv(T* values, int64_t count, int from, int tag) {
  TF_CHECK(mpi_, "irecv needs MPI (start the program with mpirun)");
  Request r;
  check(MPI_Irecv(values, count_of(count), datatype<T>(), from, tag, MPI_COMM_WORLD, &handle(r.handle_)), "MPI_Irecv");
  r.active_ = true;
  return r;
}

void Comm::exit_after_error(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (mpi_ && failure_agreed()) MPI_Finalize();
  std::_Exit(code);
}

SetupAgreement::SetupAgreement(Comm& comm) : comm_(comm), exceptions_at_start_(std::uncaught_exceptions()) {}

SetupAgreement::~SetupAgreement() {
  if (voted_ || !comm_.mpi()) return;
  try {
    vote(std::uncaught_exceptions() > exceptions_at_start_);
  } catch (...) {  // MPI itself failed: nothing more to agree on; the exit ends the run
  }
}

void SetupAgreement::succeeded() {
  if (!comm_.mpi()) return;
  if (vote(false) < comm_.size()) throw PeerFailed();
}

void SetupAgreement::so_far() {
  if (!comm_.mpi()) return;
  const bool failed = vote(false) < comm_.size();
  voted_ = false;  // the final vote is still to come
  if (failed) {
    voted_ = true;  // this was it: the failing rank's destructor voted too
    throw PeerFailed();
  }
}

int64_t SetupAgreement::vote(bool failed) {
  voted_ = true;
  const int64_t lowest = comm_.allreduce_min(failed ? comm_.rank() : comm_.size());
  if (lowest < comm_.size()) comm_.agreed_failure_rank_ = static_cast<int>(lowest);
  return lowest;
}

std::string error_prefix(const Comm& comm) {
  return comm.size() > 1 && !comm.failure_agreed() ? "rank " + std::to_string(comm.rank()) + ": " : "";
}

#define TF_DIST_INSTANTIATE(T)                                            \
  template void Comm::allreduce_sum<T>(std::span<T>);                     \
  template Request Comm::iallreduce_sum<T>(T*, int64_t);                  \
  template Request Comm::iallgather<T>(const T*, int64_t, T*);            \
  template Request Comm::isend<T>(const T*, int64_t, int, int);           \
  template Request Comm::irecv<T>(T*, int64_t, int, int);
TF_DIST_INSTANTIATE(float)
TF_DIST_INSTANTIATE(double)
TF_DIST_INSTANTIATE(int64_t)
#undef TF_DIST_INSTANTIATE

}  // namespace tf::dist
