#!/usr/bin/env bash
# Runs one libFuzzer target for a while: tests/fuzz/run.sh TARGET SECONDS [extra libFuzzer flags]
#   TARGET: recipe | tokenizer | checkpoint (tests/fuzz/TARGET_fuzz.cpp)
# Builds the clang fuzz build in build-fuzz when needed (TAPEFORMER_FUZZ=ON), copies the target's
# seed corpus into a scratch folder (the seeds in the repository are never modified), fuzzes on one
# core, then prints executions, coverage and findings. Findings (crash-*, leak-*, timeout-*, oom-*)
# are saved in the scratch folder; add a minimised one to tests/fuzz/corpus/TARGET/ after the fix.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
target="${1:?usage: run.sh TARGET SECONDS [libFuzzer flags...]}"
seconds="${2:?usage: run.sh TARGET SECONDS [libFuzzer flags...]}"
shift 2
build="${BUILD_DIR:-$here/build-fuzz}"
[[ -f "$here/tests/fuzz/${target}_fuzz.cpp" ]] || { echo "run.sh: no target tests/fuzz/${target}_fuzz.cpp" >&2; exit 2; }

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DTAPEFORMER_FUZZ=ON -DTAPEFORMER_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j2 --target "${target}_fuzz" >/dev/null

scratch="$build/fuzz-runs/${target}-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$scratch/corpus" "$scratch/findings"
cp "$here/tests/fuzz/corpus/$target/"* "$scratch/corpus/"
dict=()
[[ -f "$here/tests/fuzz/$target.dict" ]] && dict=(-dict="$here/tests/fuzz/$target.dict")

echo "fuzzing $target for ${seconds}s; scratch folder $scratch"
set +e
# allocator_may_return_null=1: HDF5 asks malloc for sizes read from a damaged file (up to 2^64) and
# handles the NULL as a release build's malloc returns it; in our code a failed new still throws
# std::bad_alloc, which is a finding, and merely large allocations still hit -rss_limit_mb.
(cd "$scratch" && OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
   LSAN_OPTIONS="suppressions=$here/tests/fuzz/lsan.supp:print_suppressions=0" \
   UBSAN_OPTIONS=print_stacktrace=1 "$build/tests/fuzz/${target}_fuzz" \
   -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
   -artifact_prefix="$scratch/findings/" "${dict[@]}" "$@" corpus) >"$scratch/fuzz.log" 2>&1
status=$?
set -e

# libFuzzer's last status line ("#N DONE cov: C ft: F corp: ...") and final stats.
grep -E '^#[0-9]+' "$scratch/fuzz.log" | tail -1 || true
grep -E '^stat::' "$scratch/fuzz.log" || true
findings=$(find "$scratch/findings" -type f | wc -l)
echo "exit status $status; findings: $findings"
find "$scratch/findings" -type f -printf '  %p\n'
if [[ $findings -gt 0 || $status -ne 0 ]]; then
  grep -m1 -A25 -E 'ERROR: |fuzz invariant|terminate called|==[0-9]+==' "$scratch/fuzz.log" || tail -30 "$scratch/fuzz.log"
  exit 1
fi
