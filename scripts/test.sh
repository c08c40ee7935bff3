#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test; then a second build with
# AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer on) runs the whole test suite again
# (no test excluded). TAPEFORMER_SKIP_SANITIZERS=1 skips that second pass. Threads are checked
# separately by tests/tsan.sh (docs/fuzzing.md, "Sanitizers"). Its last line says where the time
# went, phase by phase (README, "Tests").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
phases=()
timed() {  # timed NAME COMMAND...: runs it and notes its seconds
  local name="$1" start="$SECONDS"
  shift
  "$@"
  phases+=("$name $((SECONDS - start)) s")
}
report() {
  local joined="" phase
  for phase in "${phases[@]}"; do joined+="$phase, "; done
  echo "test.sh: ${joined}total $SECONDS s"
}
trap report EXIT
timed setup "$here/scripts/setup.sh" --test
timed build "$here/scripts/build.sh"
timed tests bash -c 'cd "$1/build" && ctest --output-on-failure -j "$(nproc)" --timeout 900' _ "$here"
if [[ "${TAPEFORMER_SKIP_SANITIZERS:-0}" != 1 ]]; then
  timed "sanitizer build" env BUILD_DIR="$here/build-asan" "$here/scripts/build.sh" \
    -DTAPEFORMER_SANITIZE=address,undefined -DTAPEFORMER_BENCH=OFF
  # allocator_may_return_null=1: libhdf5 mallocs sizes read from damaged files (the fuzz corpus's
  # hdf5_huge_malloc.h5 asks for 2^64 bytes) and copes with NULL; a failed `new` in our code is still
  # reported. lsan.supp suppresses leaks inside libhdf5 only (see the file for which tests need it).
  timed "sanitizer tests" bash -c 'cd "$1/build-asan" && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
     LSAN_OPTIONS="suppressions=$1/tests/fuzz/lsan.supp:print_suppressions=0" UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j "$(nproc)" --timeout 1800' _ "$here"
fi
