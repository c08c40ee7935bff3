#!/usr/bin/env bash
# Configures and builds tapeformer into build/ (or $BUILD_DIR).
#
#   scripts/build.sh [--target NAME]... [cmake configure arguments]
#
# Without --target it builds everything (the program, every test and benchmark).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build}"
targets=()
while [[ "${1:-}" == "--target" ]]; do
  targets+=(--target "$2")
  shift 2
done
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" "${targets[@]}" 2>&1 | grep -Ev '^\[|^-- |Scanning|Consolidate|Built target' || true
test "${PIPESTATUS[0]}" -eq 0
