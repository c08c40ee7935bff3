// The MPI wrapper (framework/dist/comm.h) on several ranks: each collective against the values
// every rank can compute for itself.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "framework/dist/comm.h"

namespace tf::dist {
namespace {

TEST(Comm, StartedByMpirun) {
  Comm& comm = Comm::world();
  EXPECT_TRUE(comm.mpi());
  EXPECT_GE(comm.size(), 2) << "run under mpirun -np 2 or more";
  EXPECT_GE(comm.rank(), 0);
  EXPECT_LT(comm.rank(), comm.size());
}

TEST(Comm, AllreduceSumsEveryRanksValues) {
  Comm& comm = Comm::world();
  const int n = comm.size(), r = comm.rank();
  std::vector<double> v = {1.0 * r, 0.5, -2.0 * r * r};
  comm.allreduce_sum(std::span<double>(v));
  double sum_r = 0, sum_r2 = 0;
  for (int k = 0; k < n; ++k) sum_r += k, sum_r2 += k * k;
  EXPECT_EQ(v[0], sum_r);
  EXPECT_EQ(v[1], 0.5 * n);
  EXPECT_EQ(v[2], -2.0 * sum_r2);
  EXPECT_EQ(comm.allreduce_max(r), n - 1);
  EXPECT_EQ(comm.allreduce_min(r + 5), 5);
}

TEST(Comm, NonBlockingAllreduceAndAllgather) {
  Comm& comm = Comm::world();
  const int n = comm.size(), r = comm.rank();
  std::vector<float> bucket(1001);  // an odd count
  std::iota(bucket.begin(), bucket.end(), static_cast<float>(r));
  Request sum = comm.iallreduce_sum(bucket.data(), static_cast<int64_t>(bucket.size()));
  std::vector<int64_t> mine = {r, 10 * r + 1}, all(2 * n);
  Request gather = comm.iallgather(mine.data(), 2, all.data());
  while (!sum.test()) {}
  gather.wait();
  for (size_t i = 0; i < bucket.size(); ++i) {
    double expected = 0;
    for (int k = 0; k < n; ++k) expected += static_cast<double>(i) + k;
    ASSERT_EQ(bucket[i], static_cast<float>(expected)) << i;
  }
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(all[2 * k], k);
    EXPECT_EQ(all[2 * k + 1], 10 * k + 1);
  }
}

TEST(Comm, RingSendReceive) {
  Comm& comm = Comm::world();
  const int n = comm.size(), r = comm.rank();
  std::vector<double> out(17, r + 0.25), in(17, -1);
  Request recv = comm.irecv(in.data(), 17, (r + n - 1) % n, 7);
  Request send = comm.isend(out.data(), 17, (r + 1) % n, 7);
  recv.wait();
  send.wait();
  for (double x : in) EXPECT_EQ(x, (r + n - 1) % n + 0.25);
}

TEST(Comm, BroadcastSendsRootsBytes) {
  Comm& comm = Comm::world();
  std::string s = comm.rank() == 0 ? std::string("checkpoint\0bytes", 16) : "x";
  comm.broadcast(s);
  EXPECT_EQ(s, std::string("checkpoint\0bytes", 16));
}

// Note [failing together]: one rank's setup error reaches every rank; only it prints.
TEST(Comm, SetupFailureOnOneRankFailsEveryRank) {
  Comm& comm = Comm::world();
  const int failing = comm.size() - 1;
  try {
    SetupAgreement setup(comm);
    if (comm.rank() == failing) throw InputError("recipe.yaml: bad key");
    setup.succeeded();
    FAIL() << "no rank may go on";
  } catch (const PeerFailed&) {
    EXPECT_NE(comm.rank(), failing);
    EXPECT_TRUE(comm.quiet());
  } catch (const InputError& e) {
    EXPECT_EQ(comm.rank(), failing);
    EXPECT_STREQ(e.what(), "recipe.yaml: bad key");
    EXPECT_FALSE(comm.quiet());
  }
  EXPECT_TRUE(comm.failure_agreed());
}

}  // namespace
}  // namespace tf::dist
