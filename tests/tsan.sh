#!/usr/bin/env bash
# ThreadSanitizer over the threaded code: tests/tsan.sh [ctest arguments...]  (not run by CI)
# Builds the tests of the OpenMP kernels and of a whole training step in build-tsan with clang,
# -fsanitize=thread and LLVM's OpenMP runtime (libomp) with its Archer tool, then runs them under
# ctest with OMP_NUM_THREADS=2 (or as set). docs/fuzzing.md, "Sanitizers", says why this setup
# and what it found. Needs Debian's clang and libomp-14-dev (which ships libarcher.so).
#
# Why not gcc: GNU libgomp is not built with TSan, so TSan does not see its barriers and reports
# false races on every parallel loop (5 on a correct 9-line program). LLVM's libomp with Archer
# (OMP_TOOL_LIBRARIES) tells TSan about OpenMP's synchronisation. oneDNN and OpenBLAS are linked
# against libgomp.so.1: a folder holding a libgomp.so.1 that is libomp (which implements the GOMP_
# entry points) goes first on LD_LIBRARY_PATH, so one runtime, libomp, serves all three.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build-tsan}"
command -v clang++ >/dev/null || { echo "tsan.sh: needs clang (apt-get install clang libomp-14-dev)" >&2; exit 2; }
llvm_lib="$(cd "$(dirname "$(readlink -f "$(command -v clang++)")")/../lib" && pwd)"  # /usr/lib/llvm-14/lib
for lib in libomp.so.5 libarcher.so; do
  [[ -f "$llvm_lib/$lib" ]] || { echo "tsan.sh: no $llvm_lib/$lib (apt-get install libomp-14-dev)" >&2; exit 2; }
done

mkdir -p "$build/omp-shim"
ln -sf "$llvm_lib/libomp.so.5" "$build/omp-shim/libgomp.so.1"
export LD_LIBRARY_PATH="$build/omp-shim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # also for test discovery
export OMP_TOOL_LIBRARIES="$llvm_lib/libarcher.so"
# called_from_lib: libomp's own memset/free of its internal buffers (schedule(dynamic) dispatch
# state) are seen by TSan's interceptors but its synchronisation is not: false reports otherwise.
export TSAN_OPTIONS="suppressions=$here/tests/tsan.supp:halt_on_error=0:exitcode=66${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

# -ffp-contract=fast: GCC's default, so that tests holding two code paths to the same bits (e.g.
# LayerNorm.AddLayerNormMatchesAddThenLayerNorm) see the fused multiply-adds they see in CI; clang's
# default (on: within one expression only) made that test differ in the last bit.
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DTAPEFORMER_SANITIZE=thread -DTAPEFORMER_BENCH=OFF "-DCMAKE_CXX_FLAGS=-gline-tables-only -ffp-contract=fast" \
    >/dev/null
fi
# Every test binary with an `omp parallel` kernel, thread_local buffers or a training step behind it.
# (tests/framework/tensor_test.cpp does not compile with clang 14: a lambda captures a structured binding.)
targets=(framework_activation framework_softmax framework_layer_norm framework_cross_entropy framework_attention
         framework_flash_attention framework_matmul_kernel framework_dropout framework_rope framework_reduce
         optim_adam optim_sgd optim_clip layers_kv_cache layers_model_invariants train_steady_state
         framework_private_grads train_thread_split)
# shellcheck disable=SC2046
cmake --build "$build" -j2 --target $(printf 'test_%s_test ' "${targets[@]}") >/dev/null

# ctest runs each test in its own process, as CI does; tests of binaries not built above are skipped,
# and so are the tests under mpirun (dist.*: Open MPI is not built with TSan either).
cd "$build" && ctest -E '_NOT_BUILT$|^fuzz_|^dist\.' -j2 --timeout 1800 --output-on-failure "$@"
