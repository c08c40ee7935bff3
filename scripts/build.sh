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
# The filter's status is not the build's: with pipefail a failed build fails the pipeline, and
# PIPESTATUS then tells which side failed (grep also fails when it prints nothing).
status=0
cmake --build "$build" -j "$(nproc)" "${targets[@]}" 2>&1 | grep -Ev '^\[|^-- |Scanning|Consolidate|Built target' ||
  status="${PIPESTATUS[0]}"
exit "$status"
