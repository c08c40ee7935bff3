#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test; then a second build with
# AddressSanitizer + UndefinedBehaviorSanitizer runs the framework tests again (the whole suite under sanitizers is not yet verified to pass).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
(cd "$here/build" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
if [[ "${TAPEFORMER_SKIP_SANITIZERS:-0}" != 1 ]]; then
  BUILD_DIR="$here/build-asan" "$here/scripts/build.sh" -DTAPEFORMER_SANITIZE=address,undefined -DTAPEFORMER_BENCH=OFF
  (cd "$here/build-asan" && ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j "$(nproc)" --timeout 1800 -L framework)
fi
