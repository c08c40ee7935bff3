#!/usr/bin/env bash
# Configures and builds tapeformer into build/ (or $BUILD_DIR), passing extra arguments to cmake.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build}"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" 2>&1 | grep -Ev '^\[|^-- |Scanning|Consolidate|Built target' || true
test "${PIPESTATUS[0]}" -eq 0
