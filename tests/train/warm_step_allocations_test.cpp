// Heap allocations in a warm training step, counted: this binary replaces malloc and its siblings
// (glibc lets an executable do that), and attributes each call made while counting to oneDNN when
// libdnnl's code is on the calling thread's stack, to us otherwise.
//
// Why a stack walk and not a flag around our oneDNN calls: oneDNN's parallel regions run on the
// OpenMP worker threads too, and only the stack tells a worker's allocation apart from one of ours.
#include <cxxabi.h>
#include <omp.h>
#include <dlfcn.h>
#include <link.h>
#include <unwind.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "framework/kernels/matmul.h"
#include "framework/kernels/onednn.h"
#include "framework/tensor.h"
#include "train/run.h"
#include "train/run_fixture.h"
#include "train/step.h"

// Sanitizers bring their own malloc; the counter is for plain builds only.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TF_NO_MALLOC_COUNTER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TF_NO_MALLOC_COUNTER 1
#endif
#endif

#ifndef TF_NO_MALLOC_COUNTER

namespace {

struct CodeRange {
  uintptr_t begin = 0, end = 0;
};

// The counter's state: plain atomics and fixed arrays, so that counting itself never allocates.
struct Counter {
  std::atomic<bool> on{false};
  std::atomic<uint64_t> ours{0}, onednn{0}, openmp{0};
  std::array<CodeRange, 4> gomp_code{};  // libgomp's executable segments
  int n_gomp = 0;
  std::array<CodeRange, 4> onednn_code{};  // libdnnl's executable segments
  int n_ranges = 0;
  // The call stacks of our own allocations, for the failure message.
  static constexpr int kFrames = 16, kSamples = 512;
  std::array<std::array<uintptr_t, kFrames>, kSamples> samples{};
  std::atomic<int> n_samples{0};
};
Counter g_counter;
thread_local bool t_in_hook = false;  // an allocation made while classifying one is not counted

struct Walk {
  bool in_onednn = false;
  bool from_gomp = false;  // libgomp itself called the allocator (its team of threads)
  std::array<uintptr_t, Counter::kFrames> frames{};
  int n = 0;
};

_Unwind_Reason_Code visit_frame(_Unwind_Context* context, void* arg) {
  auto* walk = static_cast<Walk*>(arg);
  const uintptr_t ip = _Unwind_GetIP(context);
  for (int r = 0; r < g_counter.n_ranges; ++r)
    if (ip >= g_counter.onednn_code[r].begin && ip < g_counter.onednn_code[r].end) walk->in_onednn = true;
  // Frames 0-2 are the unwinder, count_allocation and the allocator entry; 3 is its caller.
  if (walk->n == 3 || (walk->n == 4 && !walk->from_gomp))
    for (int r = 0; r < g_counter.n_gomp; ++r)
      if (ip >= g_counter.gomp_code[r].begin && ip < g_counter.gomp_code[r].end) walk->from_gomp = true;
  if (walk->n < Counter::kFrames) walk->frames[walk->n++] = ip;
  return walk->in_onednn ? _URC_END_OF_STACK : _URC_NO_REASON;
}

void count_allocation() {
  if (!g_counter.on.load(std::memory_order_relaxed) || t_in_hook) return;
  t_in_hook = true;
  Walk walk;
  _Unwind_Backtrace(visit_frame, &walk);
  if (walk.in_onednn) {
    ++g_counter.onednn;
  } else if (walk.from_gomp) {
    ++g_counter.openmp;
  } else {
    ++g_counter.ours;
    const int slot = g_counter.n_samples++;
    if (slot < Counter::kSamples) g_counter.samples[slot] = walk.frames;
  }
  t_in_hook = false;
}

void add_code_ranges(const dl_phdr_info* info, std::array<CodeRange, 4>& ranges, int& n) {
  for (int i = 0; i < info->dlpi_phnum && n < 4; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
      ranges[n++] = {info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
  }
}

int find_libraries(dl_phdr_info* info, size_t, void*) {
  if (!info->dlpi_name) return 0;
  if (std::strstr(info->dlpi_name, "libdnnl")) add_code_ranges(info, g_counter.onednn_code, g_counter.n_ranges);
  if (std::strstr(info->dlpi_name, "libgomp")) add_code_ranges(info, g_counter.gomp_code, g_counter.n_gomp);
  return 0;
}

}  // namespace

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

void* malloc(size_t n) {
  count_allocation();
  return __libc_malloc(n);
}
void* calloc(size_t count, size_t n) {
  count_allocation();
  return __libc_calloc(count, n);
}
void* realloc(void* p, size_t n) {
  count_allocation();
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  count_allocation();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) { return memalign(alignment, n); }
int posix_memalign(void** out, size_t alignment, size_t n) {
  void* p = memalign(alignment, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}

namespace tf::train {
namespace {

struct Allocations {
  uint64_t ours = 0, onednn = 0, openmp = 0;
};

// Counts the allocations `f` makes, on every thread.
template <class F>
Allocations count_allocations(F&& f) {
  if (g_counter.n_ranges == 0) dl_iterate_phdr(find_libraries, nullptr);
  g_counter.ours = 0;
  g_counter.onednn = 0;
  g_counter.openmp = 0;
  g_counter.n_samples = 0;
  g_counter.on = true;
  f();
  g_counter.on = false;
  return {g_counter.ours.load(), g_counter.onednn.load(), g_counter.openmp.load()};
}

// "function <- caller <- ..." for each distinct stack among the samples of our own allocations,
// most frequent first, skipping the allocator's own frames.
std::string our_allocation_sites() {
  std::map<std::string, int> sites;
  const int n = std::min(g_counter.n_samples.load(), Counter::kSamples);
  for (int s = 0; s < n; ++s) {
    std::string site;
    int shown = 0;
    for (uintptr_t ip : g_counter.samples[s]) {
      if (!ip || shown == 5) break;
      Dl_info info{};
      std::string name = "?";
      const bool found = dladdr(reinterpret_cast<void*>(ip - 1), &info);
      if (found && info.dli_fname) {  // a local symbol: the object file and the offset in it, for addr2line
        const char* base = std::strrchr(info.dli_fname, '/');
        char offset[32];
        std::snprintf(offset, sizeof offset, "+0x%lx", static_cast<unsigned long>(ip - 1 - reinterpret_cast<uintptr_t>(info.dli_fbase)));
        name = std::string(base ? base + 1 : info.dli_fname) + offset;
      }
      if (found && info.dli_sname) {
        int status = 0;
        char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
        name = status == 0 ? demangled : info.dli_sname;
        std::free(demangled);
      }
      if (name.find("count_allocation") != std::string::npos || name == "malloc" || name == "calloc" ||
          name.find("operator new") != std::string::npos || name.find("_Unwind") != std::string::npos)
        continue;
      site += (shown++ ? "\n      <- " : "    ") + name.substr(0, 160);
    }
    ++sites[site];
  }
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [site, count] : sites) sorted.emplace_back(count, site);
  std::sort(sorted.rbegin(), sorted.rend());
  std::string out;
  for (const auto& [count, site] : sorted) out += std::to_string(count) + " x\n" + site + "\n";
  return out;
}

TEST(WarmStepAllocations, CounterSeesOursAndOneDnnApart) {
  const Allocations mine = count_allocations([] {
    char* volatile block = new char[100];  // volatile: the new/delete pair may not be elided
    delete[] block;
  });
  EXPECT_EQ(mine.ours, 1u);
  EXPECT_EQ(mine.onednn, 0u);
}

// One warm matmul through oneDNN: what the library allocates per call.
TEST(WarmStepAllocations, OneDnnMatmulCall) {
  kernels::MatmulDims d;
  d.m = 64;
  d.k = 32;
  d.n = 96;
  d.trans_b = true;
  const Tensor a = Tensor::full({64, 32}, 1.0), b = Tensor::full({96, 32}, 1.0), bias = Tensor::full({96}, 1.0);
  const Tensor c = Tensor::empty({64, 96});
  auto call = [&] { kernels::matmul_onednn(d, a.data<float>(), b.data<float>(), c.data<float>(), bias.data<float>()); };
  call();  // makes the primitive
  const Allocations one = count_allocations(call);
  std::printf("one warm matmul: %llu allocations of ours, %llu inside oneDNN\n", (unsigned long long)one.ours,
              (unsigned long long)one.onednn);
  EXPECT_EQ(one.ours, 0u) << our_allocation_sites();
  EXPECT_EQ(c.at(0), 33.0);
}

// Warm training steps of tiny_gpt with `more` overrides allocate nothing of ours.
void expect_warm_steps_make_none_of_our_own(std::vector<std::string> more) {
  tf::testing::TempDir tmp;
  const auto text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(4000));
  // train.thread_split ops: split by rows, the threads' allocations from the one storage pool
  // interleave differently from step to step, and the pool grows (from the system) until it has seen
  // the parts' peaks coincide (tests/train/steady_state_test.cpp).
  more.insert(more.end(), {"train.grad_accum=2", "model.dropout=0.1", "train.grad_clip=0.5", "train.thread_split=ops"});
  const Recipe recipe = tf::testing::tiny_recipe("tiny_gpt", text, tmp / "run", tmp / "cache", more);
  data::PreparedCorpus corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, nullptr, true, nullptr);
  train::Run run = build_run(recipe, std::move(corpus.tokenizer));
  Batches batches(run.recipe, *run.tokenizer, corpus.train.tokens, 1);
  layers::Context ctx{true, &run.dropout_rng, nullptr};
  ctx.recompute = run.recipe.train.recompute == "blocks";  // as the trainer sets it

  for (int i = 0; i < 4; ++i) train_step(run, batches, ctx);  // warm-up: pools fill, primitives are made
  constexpr int kSteps = 3;
  const uint64_t matmuls_before = kernels::onednn_matmul_calls();
  const Allocations a = count_allocations([&] {
    for (int i = 0; i < kSteps; ++i) train_step(run, batches, ctx);
  });
  const uint64_t matmuls = kernels::onednn_matmul_calls() - matmuls_before;
  std::printf("per warm step: %.1f allocations of ours, %.1f inside oneDNN over %.1f matmuls, %.1f OpenMP teams\n",
              double(a.ours) / kSteps, double(a.onednn) / kSteps, double(matmuls) / kSteps, double(a.openmp) / kSteps);
  // Ours: none. Tape nodes, tensor handles, gradient slots, batches, split_heads, broadcasting and
  // clipping come from the object pool; kernels' scratch (layer norm's partial sums, flash
  // attention's delta and query runs) from the storage pool (storage_pool::Scratch).
  // The one exception allowed: once per thread, the first use of a kernel's thread_local scratch
  // (the flash and materialised attention kernels, the KV cache: the buffer and its
  // __cxa_thread_atexit entry), since on a loaded machine an OpenMP worker may get its first
  // attention task only after the warm-up.
  const uint64_t first_use_per_thread = 2 * 3;
  EXPECT_LE(a.ours, first_use_per_thread * omp_get_max_threads())
      << "our own allocations in " << kSteps << " warm steps, by call site:\n"
      << our_allocation_sites();
  // oneDNN's execute builds its argument map and execution context per call (the library's code:
  // 9 allocations for one matmul with bias, measured above; 374 over 54 matmuls a step here).
  EXPECT_LE(a.onednn, 9 * matmuls);
  // Not asserted: libgomp allocates a team for each parallel region that runs on one thread (an
  // `if` clause that is false, for tiny tensors); 156 a step here, fewer on larger shapes.
}

TEST(WarmStepAllocations, GptStepMakesNoneOfOurOwn) { expect_warm_steps_make_none_of_our_own({}); }

// Muon: the Newton-Schulz buffers are the optimizer's, sized when it is built.
TEST(WarmStepAllocations, MuonStepMakesNoneOfOurOwn) { expect_warm_steps_make_none_of_our_own({"optim.name=muon"}); }

// Every sequence mixer in one stack: the selective scan's per-task buffers, the convolution and
// linear attention's chunk states come from the storage pool too.
TEST(WarmStepAllocations, EveryMixerStepMakesNoneOfOurOwn) {
  expect_warm_steps_make_none_of_our_own(
      {"model.n_layers=4", "model.mixer=[differential, mamba, linear, attention]", "model.mamba_state=4"});
}

// train.recompute blocks: the recomputed block's node and the replay tapes are reused too.
TEST(WarmStepAllocations, RecomputedStepMakesNoneOfOurOwn) {
  expect_warm_steps_make_none_of_our_own({"train.recompute=blocks"});
}

}  // namespace
}  // namespace tf::train

#else

TEST(WarmStepAllocations, SkippedUnderSanitizers) { GTEST_SKIP() << "sanitizers replace malloc themselves"; }

#endif
