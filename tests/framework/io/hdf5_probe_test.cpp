// The probe (framework/io/hdf5_io.h, Note [probing in a child process]): a child killed by a signal,
// past its deadline, exiting otherwise or unable to open the file becomes an InputError naming
// the file and the step; the files on which libhdf5 1.10.8 itself crashes or hangs
// (tests/fuzz/corpus/checkpoint/hdf5_*.h5, found by checkpoint_fuzz) are refused or read, never
// fatal, in bounded time; forking works while OpenMP's threads exist.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "framework/io/hdf5_io.h"
#include "framework/io/hdf5_io_common.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace tf {
namespace {

namespace fs = std::filesystem;
using testing::error_message;
using testing::TempDir;

void expect_has(const std::string& message, const std::string& fragment) {
  EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sets the probe's options for one test and restores them.
class ProbeOptionsScope {
 public:
  explicit ProbeOptionsScope(const Hdf5ProbeOptions& o) : saved_(hdf5_probe_options()) { set_hdf5_probe_options(o); }
  ~ProbeOptionsScope() { set_hdf5_probe_options(saved_); }
  ProbeOptionsScope(const ProbeOptionsScope&) = delete;
  ProbeOptionsScope& operator=(const ProbeOptionsScope&) = delete;

 private:
  Hdf5ProbeOptions saved_;
};

TEST(Hdf5Probe, AChildKilledByASignalIsAnInputErrorNamingTheFileAndTheStep) {
  const std::string msg = error_message<InputError>([] {
    hdf5::run_in_child("ckpt.h5", 0, 30, [](hdf5::ProbeReport& report, const std::string&, uint64_t) {
      report.step("reading attribute 'created' of '/'");
      std::raise(SIGSEGV);
    });
  });
  expect_has(msg, "the HDF5 library crashed (signal 11, ");
  expect_has(msg, "reading 'ckpt.h5' (while reading attribute 'created' of '/'): the file is damaged or not a "
                  "tapeformer checkpoint");
}

TEST(Hdf5Probe, AChildPastItsDeadlineIsKilled) {
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = error_message<InputError>([] {
    hdf5::run_in_child("ckpt.h5", 0, 0.5, [](hdf5::ProbeReport& report, const std::string&, uint64_t) {
      report.step("looking up '/model'");
      for (;;) ::pause();  // as HDF5 looping in a damaged B-tree
    });
  });
  EXPECT_LT(seconds_since(start), 5.0);
  expect_has(msg, "the HDF5 library did not finish reading 'ckpt.h5' within 0.5 s (stuck while looking up '/model')");
}

TEST(Hdf5Probe, AChildThatCannotOpenTheFileOrExitsOtherwiseIsReported) {
  std::string msg = error_message<InputError>([] {
    hdf5::run_in_child("ckpt.h5", 0, 30, [](hdf5::ProbeReport& report, const std::string&, uint64_t) {
      report.cannot_open("H5Fopen failed (bad object header version number)");
    });
  });
  EXPECT_EQ(msg, "cannot open HDF5 file 'ckpt.h5' (truncated or damaged?): H5Fopen failed (bad object header "
                 "version number)");
  msg = error_message<InputError>([] {
    hdf5::run_in_child("ckpt.h5", 0, 30, [](hdf5::ProbeReport& report, const std::string&, uint64_t) {
      report.step("opening the file");
      ::_exit(7);  // as a sanitizer's report ends the child
    });
  });
  expect_has(msg, "the HDF5 library failed (exit status 7) reading 'ckpt.h5' (while opening the file)");
  // And a child that reports done() is no error.
  hdf5::run_in_child("ckpt.h5", 0, 30, [](hdf5::ProbeReport& report, const std::string&, uint64_t) { report.step("x"); });
}

// The inputs once kept in tests/fuzz/known/ (libhdf5 crashes, hangs and a 4 GiB allocation), now
// replayed in the fuzz corpus, and the earlier libhdf5 findings there: each is refused with an
// InputError naming the file, in bounded time, most by the probe meeting an HDF5 error before
// this process calls HDF5. The attribute hang is refused by the probe's deadline (1.5 s + 61 KB /
// 50 MB/s); the "link lookup hang" was a group listing itself 21 times under an empty name, which
// H5Reader::list refuses itself.
TEST(Hdf5Probe, FilesThatCrashOrHangLibhdf5AreRefusedInBoundedTime) {
  const ProbeOptionsScope fast({.enabled = true, .base_seconds = 1.5, .bytes_per_second = 50e6});
  const fs::path corpus = fs::path(TAPEFORMER_SOURCE_DIR) / "tests/fuzz/corpus/checkpoint";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("hdf5_", 0) != 0) continue;
    ++files;
    SCOPED_TRACE(name);
    const std::string path = entry.path().string();
    const auto start = std::chrono::steady_clock::now();
    std::string refusal;
    std::vector<std::string> refused_calls;  // what the reader refused after opening the file
    auto attempt = [&](const std::string& what, auto&& call) {
      try {
        call();
      } catch (const InputError& e) {
        expect_has(e.what(), path);
        refused_calls.push_back(what + ": " + e.what());
      }
    };
    try {  // everything the reader offers, over the tree (as tests/fuzz/checkpoint_fuzz.cpp)
      const H5Reader in(path);
      for (const std::string group : {"/", "/model", "/optimizer", "/rng", "/data"}) {
        attempt("list " + group, [&] {
          for (const std::string& member : in.list(group)) {
            attempt("read " + member, [&] { in.read_tensor(group, member); });
            attempt("has_attr " + member, [&] { in.has_attr(group + "/" + member, "step"); });
          }
        });
      }
      for (const char* key : {"format_version", "created", "writer"}) attempt(key, [&] { in.read_attr("/", key); });
    } catch (const InputError& e) {
      refusal = e.what();
      expect_has(refusal, path);
    }
    EXPECT_LT(seconds_since(start), 10.0) << refusal;
    EXPECT_FALSE(refusal.empty()) << "every one of them is damaged";
    if (name == "hdf5_vlen_attribute_hang.h5")
      expect_has(refusal, "the HDF5 library did not finish reading '" + path + "' within 1.5 s (stuck while reading "
                          "attribute 'created' of '/')");
    if (name == "hdf5_link_lookup_hang.h5") {  // the reader's own check, which the probe leaves to it
      const ProbeOptionsScope off({.enabled = false});
      const std::string msg = error_message<InputError>([&] { H5Reader(path).list("/optimizer"); });
      expect_has(msg, "HDF5 file '" + path + "', group '/optimizer': member 0 is named '', which no HDF5 link can "
                      "be (damaged group index)");
    }
    std::printf("  %-36s %5.2f s  %s\n", name.c_str(), seconds_since(start),
                refusal.empty() ? ("opened; " + std::to_string(refused_calls.size()) + " calls refused").c_str()
                                : refusal.c_str());
  }
  EXPECT_EQ(files, 7) << "the five inputs once in tests/fuzz/known/ and two earlier libhdf5 findings";
}

// fork() while OpenMP's worker threads exist: the child uses none of them, and the parent's pool
// still works afterwards.
TEST(Hdf5Probe, ForkingWhileOpenMpThreadsExistLeavesThemWorking) {
  const TempDir dir;
  const std::string path = (dir / "w.h5").string();
  {
    H5Writer out(path);
    out.write_tensor("/", "w", Tensor::from_vector({1.0, 2.0, 3.0}, {3}));
    out.close();
  }
  auto parallel_sum = [] {
    double sum = 0;
#pragma omp parallel for reduction(+ : sum) num_threads(2)
    for (int i = 1; i <= 1000; ++i) sum += i;
    return sum;
  };
  EXPECT_EQ(parallel_sum(), 500500.0);  // the pool now exists
  double read_sum = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    {  // forks from inside a parallel region, while the other thread waits at the barrier
      const Tensor w = H5Reader(path).read_tensor("/", "w");
      read_sum = w.at(0) + w.at(1) + w.at(2);
    }
  }
  EXPECT_EQ(read_sum, 6.0);
  EXPECT_EQ(parallel_sum(), 500500.0);
}

// Leaves this process one free file descriptor while it lives (a file size limit of 256, every
// descriptor below it taken but one), and gives them all back when it goes.
// Under AddressSanitizer + UndefinedBehaviorSanitizer the tests that starve the process of file
// descriptors are skipped: the sanitizer runtimes need descriptors of their own (UBSan's vptr check
// of the caught exception failed there, "object has invalid vptr / memory cannot be printed").
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

class OneFreeDescriptor {
 public:
  OneFreeDescriptor() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = 256;
    ok_ = saved_.rlim_max >= 256 && ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
    for (int fd; ok_ && (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) taken_.push_back(fd);
    ok_ = ok_ && !taken_.empty();
    if (ok_) {
      ::close(taken_.back());
      taken_.pop_back();
    }
  }
  ~OneFreeDescriptor() {
    for (int fd : taken_) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  OneFreeDescriptor(const OneFreeDescriptor&) = delete;
  OneFreeDescriptor& operator=(const OneFreeDescriptor&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  std::vector<int> taken_;
  bool ok_ = false;
};

void write_one_value(const std::string& path, double value) {
  H5Writer out(path);
  out.write_tensor("/", "w", Tensor::from_vector({value}, {1}));
  out.close();
}

// With one descriptor left, the reader can open the file to check its header, but the probe's
// pipe needs two: the error says so and how to do without the probe.
TEST(Hdf5Probe, AProcessOutOfFileDescriptorsIsToldWhy) {
  if (kSanitizerBuild) GTEST_SKIP() << "starves the sanitizer runtimes of file descriptors";
  const TempDir dir;
  const std::string path = (dir / "w.h5").string();
  write_one_value(path, 1.0);
  std::string msg;
  {
    const OneFreeDescriptor one;
    if (!one.ok()) GTEST_SKIP() << "cannot lower the file descriptor limit to 256";
    msg = error_message<InputError>([&] { H5Reader in(path); });
  }
  EXPECT_EQ(msg, "cannot probe HDF5 file '" + path + "' in a child process: pipe: " + std::strerror(EMFILE) +
                     " (TAPEFORMER_HDF5_PROBE=0 reads it without the probe)");
  EXPECT_EQ(H5Reader(path).read_tensor("/", "w").at(0), 1.0) << "and with descriptors back, it reads";
}

// A file that passed the probe is not probed again while it is unchanged (seen by the probe's
// pipe failing for want of descriptors), and is again once it is replaced; with the integrity
// header and without (a file of the C API, whose crc32 is taken over the whole file).
TEST(Hdf5Probe, AFileThatPassedIsProbedAgainOnlyOnceItChanged) {
  if (kSanitizerBuild) GTEST_SKIP() << "starves the sanitizer runtimes of file descriptors";
  const TempDir dir;
  const std::string sealed = (dir / "sealed.h5").string(), bare = (dir / "bare.h5").string();
  auto write_bare = [&](double value) {
    const hid_t file = H5Fcreate(bare.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t n = 1;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t ds = H5Dcreate2(file, "w", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value);
    H5Dclose(ds);
    H5Sclose(space);
    H5Fclose(file);
  };
  for (const std::string& path : {sealed, bare}) {
    SCOPED_TRACE(path);
    auto write = [&](double value) { path == sealed ? write_one_value(path, value) : write_bare(value); };
    write(1.0);
    EXPECT_EQ(H5Reader(path).read_tensor("/", "w").at(0), 1.0);  // probed, remembered
    {
      const OneFreeDescriptor one;
      if (!one.ok()) GTEST_SKIP() << "cannot lower the file descriptor limit to 256";
      EXPECT_EQ(H5Reader(path).read_tensor("/", "w").at(0), 1.0) << "not probed: the one descriptor suffices";
    }
    write(2.0);  // other bytes under the same name
    std::string msg;
    {
      const OneFreeDescriptor one;
      msg = error_message<InputError>([&] { H5Reader in(path); });
    }
    EXPECT_NE(msg.find("cannot probe HDF5 file '" + path + "' in a child process: pipe"), std::string::npos) << msg;
    EXPECT_EQ(H5Reader(path).read_tensor("/", "w").at(0), 2.0);
  }
}

TEST(Hdf5Probe, OptionsAreCheckedAndTheProbeCanBeTurnedOff) {
  expect_has(error_message<Error>([] { set_hdf5_probe_options({.enabled = true, .base_seconds = 0}); }),
             "base_seconds (0) and bytes_per_second (5e+07) must be positive");
  const TempDir dir;
  const std::string path = (dir / "w.h5").string();
  {
    H5Writer out(path);
    out.write_tensor("/", "w", Tensor::from_vector({1.0}, {1}));
    out.close();
  }
  const ProbeOptionsScope off({.enabled = false});
  EXPECT_FALSE(hdf5_probe_options().enabled);
  EXPECT_EQ(H5Reader(path).read_tensor("/", "w").at(0), 1.0);
}

}  // namespace
}  // namespace tf
