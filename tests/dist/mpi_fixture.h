// Shared by the tests that start `mpirun -np N tapeformer ...` (label mpi): running the program
// under mpirun, or alone, to completion.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "train/run_fixture.h"

namespace tf::testing {

// mpirun may run as root only when asked (CI and the fresh-Debian check run as root); one thread
// per rank, as 2 ranks share the machine's 2 cores.
inline void allow_root() {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("OMP_NUM_THREADS", "1", 1);
}

// mpirun's arguments for `tapeformer ARGS` on `ranks` ranks.
inline std::vector<std::string> under_mpirun(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--oversubscribe", "--bind-to", "none", "-np", std::to_string(ranks),
                                  TAPEFORMER_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

struct Outcome {
  int code;
  std::string out, err;
};

// `tapeformer ARGS` on `ranks` ranks (0: one process without mpirun), its output kept in `dir`.
inline Outcome run(const std::filesystem::path& dir, const std::string& name, int ranks,
                   const std::vector<std::string>& args) {
  allow_root();
  const std::filesystem::path out = dir / (name + ".out"), err = dir / (name + ".err");
  Child child(ranks > 0 ? under_mpirun(ranks, args) : args, out, err, {},
              ranks > 0 ? TAPEFORMER_MPIRUN : TAPEFORMER_BINARY);
  const int status = child.wait();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_file(out), read_file(err)};
}

}  // namespace tf::testing
