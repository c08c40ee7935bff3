// main() of the tests that run under mpirun (tests/dist/*_mpi.cpp, ctest label mpi): every rank
// runs every test; rank 0 prints GoogleTest's usual report, the other ranks print only their
// failures, prefixed with their rank; the exit code is non-zero when a test failed on any rank.
#include <gtest/gtest.h>

#include <cstdio>

#include "framework/dist/comm.h"

namespace {

class FailuresOnly : public testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  tf::dist::Comm& comm = tf::dist::Comm::world();
  if (comm.rank() != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(comm.rank()));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  const int64_t failed_anywhere = comm.allreduce_max(failed);
  if (comm.rank() == 0 && failed_anywhere && !failed) std::fprintf(stderr, "a test failed on another rank (above)\n");
  return failed_anywhere ? 1 : 0;
}
