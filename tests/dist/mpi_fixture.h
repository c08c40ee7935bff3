// Shared by the tests that start `mpirun -np N tapeformer ...` (label mpi): running the program
// under mpirun, or alone, to completion.
#pragma once
#include <sys/types.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>

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

// The pid of the process of `rank` under mpirun: the tapeformer child whose environment says so and
// holds the variable `marker` (which the test set before starting mpirun, to tell its ranks from any
// other job's on the machine); -1 when there is none.
inline pid_t rank_pid(int rank, const std::string& marker) {
  const std::string wanted = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(environ)), std::istreambuf_iterator<char>());
    if (all.find(std::string("\0", 1) + wanted + std::string("\0", 1)) == std::string::npos &&
        all.rfind(wanted + std::string("\0", 1), 0) != 0)
      continue;
    std::ifstream cmdline(entry.path() / "cmdline", std::ios::binary);
    std::string argv0;
    std::getline(cmdline, argv0, '\0');
    if (argv0 == TAPEFORMER_BINARY && all.find(marker + "=") != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

}  // namespace tf::testing
