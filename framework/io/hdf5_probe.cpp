// The probe (Note [probing in a child process] in hdf5_io.h): before H5Reader opens a file in this
// process, a forked child opens it and walks it as the reader would, so that a file on which
// libhdf5 crashes or hangs costs a child process, not the program.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>

#include "framework/io/hdf5_io.h"
#include "framework/io/hdf5_io_common.h"
#include "framework/shape.h"

// Declared weak so that it is null unless a sanitizer runtime is linked (then it replaces the
// death callback, e.g. libFuzzer's, which would save the input as a crash of the whole process).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace tf {

namespace {

Hdf5ProbeOptions& options() {
  static Hdf5ProbeOptions current = [] {
    Hdf5ProbeOptions o;
    const char* env = std::getenv("TAPEFORMER_HDF5_PROBE");
    if (env != nullptr && (std::strcmp(env, "0") == 0 || std::strcmp(env, "off") == 0)) o.enabled = false;
    return o;
  }();
  return current;
}

}  // namespace

void set_hdf5_probe_options(const Hdf5ProbeOptions& o) {
  TF_CHECK(o.base_seconds > 0 && o.bytes_per_second > 0, "set_hdf5_probe_options: base_seconds (", o.base_seconds,
           ") and bytes_per_second (", o.bytes_per_second, ") must be positive");
  options() = o;
}

Hdf5ProbeOptions hdf5_probe_options() { return options(); }

namespace hdf5 {

void ProbeReport::step(const std::string& what) {
  const uint32_t next = 1 - steps_.latest.load(std::memory_order_relaxed);
  const size_t n = std::min(what.size(), sizeof steps_.slot[next] - 1);
  std::memcpy(steps_.slot[next], what.data(), n);
  steps_.slot[next][n] = '\0';
  steps_.latest.store(next, std::memory_order_release);
}

void ProbeReport::cannot_open(const std::string& reason) { send('E', reason); }
void ProbeReport::damaged(const std::string& where_and_reason) { send('F', where_and_reason); }
void ProbeReport::done() { send('D', ""); }

void ProbeReport::send(char kind, const std::string& text) {
  std::string line = std::string(1, kind) + " " + text + "\n";
  for (size_t i = 2; i + 1 < line.size(); ++i)
    if (line[i] == '\n') line[i] = ' ';  // one record per line
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(3);  // the parent is gone
    done += static_cast<size_t>(n);
  }
}

namespace {

// ---------------------------------------------------------------------------------------------
// The child: the walk, with HDF5's C API (no exceptions to unwind in a forked child)

// Groups deeper than this are not walked (a checkpoint is three deep; the reader has no use for more).
constexpr int kMaxDepth = 32;
constexpr const char* kAbsent = "tapeformer-probe-absent-name";

// Every HDF5 call is checked: the first that fails ends the walk, and the file is refused with
// HDF5's reason (Note [probing in a child process]). Steps and places are named in the reader's
// words ("dataset '/model/w'"), so that a refusal reads like the reader's own.
struct Walker {
  hid_t file;
  ProbeReport& report;
  uint64_t file_size;
  std::set<haddr_t> visited;  // object header addresses: hard links may form cycles

  // HDF5 failed on `where`: report it and end the child (the parent refuses the file).
  [[noreturn]] void fail(const std::string& where, const char* call) {
    report.damaged(where + ": " + detail(std::string(call) + " failed"));
    ::_exit(0);
  }
  hid_t check(hid_t id, const std::string& where, const char* call) {
    if (id < 0) fail(where, call);
    return id;
  }

  bool first_visit(hid_t object, const std::string& where) {
    H5O_info_t info{};
    check(H5Oget_info2(object, &info, H5O_INFO_BASIC), where, "H5Oget_info");
    return visited.insert(info.addr).second;
  }

  // As H5Reader::read_attr: one value; a string only once its length passed the limit.
  void attribute(hid_t attr, const std::string& where) {
    const hid_t space = check(H5Aget_space(attr), where, "H5Aget_space");
    const hid_t type = check(H5Aget_type(attr), where, "H5Aget_type");
    const hssize_t points = H5Sget_simple_extent_npoints(space);
    check(points, where, "H5Sget_simple_extent_npoints");
    if (points == 1) {
      report.step("reading " + where);
      const size_t size = H5Tget_size(type);
      switch (H5Tget_class(type)) {
        case H5T_STRING:
          if (H5Tis_variable_str(type) > 0) {
            uint32_t length = 0;
            check(H5Aread(attr, vlen_length_type(), &length), where, "H5Aread");
            if (length <= kMaxAttrString) {
              char* value = nullptr;
              check(H5Aread(attr, type, &value), where, "H5Aread");
              H5free_memory(value);
            }
          } else if (size <= kMaxAttrString) {
            std::vector<char> value(size + 1);
            check(H5Aread(attr, type, value.data()), where, "H5Aread");
          }
          break;
        case H5T_INTEGER: {
          int64_t value = 0;
          const bool wide_unsigned = H5Tget_sign(type) == H5T_SGN_NONE && size >= 8;
          if (size <= 8) check(H5Aread(attr, wide_unsigned ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, &value), where, "H5Aread");
          break;
        }
        case H5T_FLOAT: {
          double value = 0;
          check(H5Aread(attr, H5T_NATIVE_DOUBLE, &value), where, "H5Aread");
          break;
        }
        default: break;  // the reader refuses other types without reading them
      }
    }
    H5Tclose(type);
    H5Sclose(space);
  }

  // Every attribute of `object`, by index and then by name (H5Aexists, H5Aopen), as has_attr and
  // read_attr reach them; and one absent name.
  void attributes(hid_t object, const std::string& path) {
    const std::string where = "attributes of '" + path + "'";
    report.step("looking up an absent attribute of '" + path + "'");
    check(H5Aexists(object, kAbsent), where, "H5Aexists");
    H5O_info_t info{};
    check(H5Oget_info2(object, &info, H5O_INFO_NUM_ATTRS), where, "H5Oget_info");
    for (hsize_t i = 0; i < info.num_attrs; ++i) {
      const std::string nth = concat("attribute ", i, " of '", path, "'");
      report.step("opening " + nth);
      const hid_t by_index =
          check(H5Aopen_by_idx(object, ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT), nth, "H5Aopen_by_idx");
      const ssize_t length = H5Aget_name(by_index, 0, nullptr);
      check(length, nth, "H5Aget_name");
      std::string name(static_cast<size_t>(length), '\0');
      check(H5Aget_name(by_index, name.size() + 1, name.data()), nth, "H5Aget_name");
      H5Aclose(by_index);
      const std::string named = "attribute '" + name + "' of '" + path + "'";
      report.step("looking up " + named);
      if (check(H5Aexists(object, name.c_str()), named, "H5Aexists") == 0) continue;  // the reader: "not found"
      const hid_t attr = check(H5Aopen(object, name.c_str(), H5P_DEFAULT), named, "H5Aopen");
      attribute(attr, named);
      H5Aclose(attr);
    }
  }

  // As H5Reader::read_tensor / read_u64 / read_bytes: type and shape, then the data if the
  // reader's limits allow it: one element when it is stored contiguously (a plain read at an
  // address HDF5 checked when it opened the dataset), all of it otherwise (chunk indexes,
  // compact storage).
  void dataset(const std::string& path) {
    const std::string where = "dataset '" + path + "'";
    report.step("opening " + where);
    const hid_t ds = check(H5Dopen2(file, path.c_str(), H5P_DEFAULT), where, "H5Dopen2");
    if (first_visit(ds, where)) {
      attributes(ds, path);
      read_data(ds, where);
    }
    H5Dclose(ds);
  }

  void read_data(hid_t ds, const std::string& where) {
    report.step("reading the type and shape of " + where);
    const hid_t type = check(H5Dget_type(ds), where, "H5Dget_type");
    const hid_t space = check(H5Dget_space(ds), where, "H5Dget_space");
    const hid_t plist = check(H5Dget_create_plist(ds), where, "H5Dget_create_plist");
    hid_t memory = -1;  // the reader's types only: it refuses others without reading them
    const size_t size = H5Tget_size(type);
    const H5T_class_t cls = H5Tget_class(type);
    const bool is_signed = cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_2;
    if (cls == H5T_FLOAT && size == 4) memory = H5T_NATIVE_FLOAT;
    if (cls == H5T_FLOAT && size == 8) memory = H5T_NATIVE_DOUBLE;
    if (cls == H5T_INTEGER && is_signed && size == 4) memory = H5T_NATIVE_INT32;
    if (cls == H5T_INTEGER && !is_signed && size == 8) memory = H5T_NATIVE_UINT64;
    if (cls == H5T_INTEGER && !is_signed && size == 1) memory = H5T_NATIVE_UINT8;
    const H5S_class_t space_class = H5Sget_simple_extent_type(space);
    if (space_class == H5S_NO_CLASS) fail(where, "H5Sget_simple_extent_type");
    const int rank = space_class == H5S_SIMPLE ? check(H5Sget_simple_extent_ndims(space), where, "H5Sget_simple_extent_ndims") : 0;
    if (memory >= 0 && (space_class == H5S_SCALAR || space_class == H5S_SIMPLE) && rank <= Shape::kMaxRank) {
      std::vector<hsize_t> dims(rank), start(rank, 0), one(rank, 1);
      if (rank > 0) check(H5Sget_simple_extent_dims(space, dims.data(), nullptr), where, "H5Sget_simple_extent_dims");
      uint64_t numel = 1;  // the reader's limits (check_shape in hdf5_reader.cpp)
      bool fits = true;
      for (hsize_t d : dims) {
        fits = fits && d <= kMaxElements && (d == 0 || numel <= kMaxElements / d);
        if (fits) numel *= d;
      }
      const size_t element = H5Tget_size(memory);
      if (fits && numel > 0 && numel * element <= file_size) {
        const H5D_layout_t layout = H5Pget_layout(plist);
        if (layout < 0) fail(where, "H5Pget_layout");
        report.step("reading " + where);
        if (layout == H5D_CONTIGUOUS && rank > 0) {
          const hid_t one_element = check(H5Screate_simple(rank, one.data(), nullptr), where, "H5Screate_simple");
          check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, one.data(), nullptr), where,
                "H5Sselect_hyperslab");
          std::vector<char> value(element);
          check(H5Dread(ds, memory, one_element, space, H5P_DEFAULT, value.data()), where, "H5Dread");
          H5Sclose(one_element);
        } else {
          std::vector<char> values(numel * element);
          check(H5Dread(ds, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), where, "H5Dread");
        }
      }
    }
    H5Pclose(plist);
    H5Sclose(space);
    H5Tclose(type);
  }

  // As H5Reader::list and has: the links by index, each looked up by name (H5Lexists, then its
  // object type), and one absent name.
  void group(const std::string& path, int depth) {
    const std::string where = "listing group '" + path + "'";
    report.step("opening group '" + path + "'");
    const hid_t g = check(H5Gopen2(file, path.c_str(), H5P_DEFAULT), where, "H5Gopen2");
    if (first_visit(g, where)) {
      attributes(g, path);
      members(g, path, depth);
    }
    H5Gclose(g);
  }

  void members(hid_t g, const std::string& path, int depth) {
    const std::string where = "listing group '" + path + "'";
    report.step("looking up an absent name in '" + path + "'");
    check(H5Lexists(g, kAbsent, H5P_DEFAULT), where, "H5Lexists");
    H5G_info_t info{};
    check(H5Gget_info(g, &info), where, "H5Gget_info");
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      report.step(concat("listing member ", i, " of '", path, "'"));
      const ssize_t length = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
      check(length, where, "H5Lget_name_by_idx");
      std::string name(static_cast<size_t>(length), '\0');
      check(H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size() + 1, H5P_DEFAULT),
            where, "H5Lget_name_by_idx");
      if (name.empty() || name.find('/') != std::string::npos) continue;  // the reader refuses it by name
      const std::string child = join(path, name);
      const std::string looking = "looking up '" + child + "'";
      report.step(looking);
      if (check(H5Lexists(file, child.c_str(), H5P_DEFAULT), looking, "H5Lexists") == 0) continue;
      H5O_info_t object{};
      check(H5Oget_info_by_name2(file, child.c_str(), &object, H5O_INFO_ALL, H5P_DEFAULT), looking,
            "H5Oget_info_by_name");
      if (object.type == H5O_TYPE_GROUP && depth < kMaxDepth) group(child, depth + 1);
      if (object.type == H5O_TYPE_DATASET) dataset(child);
    }
  }
};

void walk_file(ProbeReport& report, const std::string& path, uint64_t size) {
  report.step("opening the file");
  forget_cause();
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) {
    report.cannot_open(detail("H5Fopen failed"));
    return;
  }
  Walker walker{file, report, size, {}};
  walker.group("/", 0);
  // Not closed: the child ends with _exit, and closing could only meet the damage again.
}

// ---------------------------------------------------------------------------------------------
// The child's setup

// Caps the child's address space at its size now + 1 GiB + twice the file, so that a forged size
// HDF5 trusts (a 4 GiB object header) fails as an allocation instead of taking the machine's
// memory. Relative to the size at fork, so it also holds under AddressSanitizer's reservations.
void cap_address_space(uint64_t file_size) {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char text[128] = {};
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return;
  const uint64_t pages = std::strtoull(text, nullptr, 10);  // the first field: total program size
  const uint64_t now = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0) return;
  const uint64_t cap = now + (uint64_t{1} << 30) + 2 * file_size;
  if (limit.rlim_max != RLIM_INFINITY && cap > limit.rlim_max) return;
  limit.rlim_cur = cap;
  ::setrlimit(RLIMIT_AS, &limit);
}

void prepare_child(pid_t parent, uint64_t file_size) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the probe must not outlive the program
  if (::getppid() != parent) ::_exit(5);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGALRM, SIGXCPU, SIGXFSZ, SIGPIPE,
                  SIGTERM})
    ::sigaction(sig, &default_action, nullptr);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, nullptr);  // Ctrl-C is the parent's to handle
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(nullptr);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  cap_address_space(file_size);
}

std::string signal_name(int sig) {
  const char* name = ::strsignal(sig);
  return name != nullptr ? concat(sig, ", ", name) : std::to_string(sig);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The parent

void run_in_child(const std::string& path, uint64_t size, double seconds, ProbeWalk walk) {
  const std::string cannot = concat("cannot probe HDF5 file '", path, "' in a child process: ");
  const std::string remedy = " (TAPEFORMER_HDF5_PROBE=0 reads it without the probe)";
  void* page = ::mmap(nullptr, sizeof(ProbeSteps), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  TF_CHECK_INPUT(page != MAP_FAILED, cannot, "mmap: ", std::strerror(errno), remedy);
  auto* steps = new (page) ProbeSteps;
  struct Unmap {
    void* page;
    ~Unmap() { ::munmap(page, sizeof(ProbeSteps)); }
  } unmap{page};
  int fds[2];
  TF_CHECK_INPUT(::pipe2(fds, O_CLOEXEC) == 0, cannot, "pipe: ", std::strerror(errno), remedy);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int saved = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw InputError(concat(cannot, "fork: ", std::strerror(saved), remedy));
  }
  if (pid == 0) {  // the child: HDF5 and plain buffers only, then _exit (no atexit handlers)
    ::close(fds[0]);
    prepare_child(parent, size);
    ProbeReport report(fds[1], *steps);
    try {
      walk(report, path, size);
      report.done();
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(0);
  }
  ::close(fds[1]);

  // Read the child's records until it closes the pipe (it exited) or the deadline passes.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(seconds));
  std::string pending, open_error, damage;
  bool done = false, timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the loop's deadline check decides
    char buffer[4096];
    const ssize_t n = ready > 0 ? ::read(fds[0], buffer, sizeof buffer) : -1;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file: the child has exited
    pending.append(buffer, static_cast<size_t>(n));
    for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
      if (pending[0] == 'E') open_error = end >= 2 ? pending.substr(2, end - 2) : "";
      if (pending[0] == 'F') damage = end >= 2 ? pending.substr(2, end - 2) : "";
      if (pending[0] == 'D') done = true;
    }
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  // The child is gone: its last complete step can be read without racing it.
  const uint32_t latest = steps->latest.load(std::memory_order_acquire);
  const std::string last_step = steps->slot[latest][0] != '\0' ? std::string(steps->slot[latest]) : "starting";

  char limit[32];
  std::snprintf(limit, sizeof limit, "%.1f", seconds);
  const std::string verdict = "the file is damaged or not a tapeformer checkpoint";
  TF_CHECK_INPUT(!timed_out, "the HDF5 library did not finish reading '", path, "' within ", limit,
                 " s (stuck while ", last_step, "): ", verdict);
  if (waited == pid && WIFSIGNALED(status)) {
    throw InputError(concat("the HDF5 library crashed (signal ", signal_name(WTERMSIG(status)), ") reading '", path,
                            "' (while ", last_step, "): ", verdict));
  }
  // waitpid fails only where SIGCHLD is ignored (children are reaped unseen): the records decide.
  const bool exited_cleanly = waited != pid || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
  TF_CHECK_INPUT(open_error.empty() || !exited_cleanly, "cannot open HDF5 file '", path,
                 "' (truncated or damaged?): ", open_error);
  TF_CHECK_INPUT(damage.empty() || !exited_cleanly, "HDF5 file '", path, "', ", damage);
  TF_CHECK_INPUT(done && exited_cleanly, "the HDF5 library failed (", waited == pid && WIFEXITED(status) ?
                 concat("exit status ", WEXITSTATUS(status)) : std::string("no result"), ") reading '", path,
                 "' (while ", last_step, "): ", verdict);
}

void probe(const std::string& path, const CheckedFile& file) {
  static std::array<CheckedFile, 8> passed{};  // a ring of the last files that passed
  static size_t next = 0;
  if (std::find(passed.begin(), passed.end(), file) != passed.end()) return;
  const Hdf5ProbeOptions o = options();
  run_in_child(path, file.size, o.base_seconds + static_cast<double>(file.size) / o.bytes_per_second, walk_file);
  passed[next++ % passed.size()] = file;
}

}  // namespace hdf5

}  // namespace tf
