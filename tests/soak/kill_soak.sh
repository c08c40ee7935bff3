#!/usr/bin/env bash
# Kill soak: SIGKILLs `tapeformer train` at N seeded random moments (default 100) and checks after
# each kill that the newest checkpoint loads and is at most one checkpoint interval old, and that
# --resume finishes bit-identical to an uninterrupted run. It is tests/train/kill_test.cpp with
# more trials (ctest runs that test with 10); about 2.5 s per trial on a 2-core machine.
#
#   bash tests/soak/kill_soak.sh [TRIALS] [SEED]     # after scripts/build.sh (or any build/)
#   BUILD_DIR=build-asan bash tests/soak/kill_soak.sh 20
set -euo pipefail
cd "$(dirname "$0")/../.."
trials=${1:-100}
seed=${2:-20261129}
build=${BUILD_DIR:-build}
binary="$build/tests/test_train_kill_test"
if [[ ! -x "$binary" ]]; then
  echo "kill_soak: $binary not found; build first (cmake --build $build --target test_train_kill_test)" >&2
  exit 2
fi
echo "kill soak: $trials trials, seed $seed ($binary)"
TAPEFORMER_KILL_TRIALS=$trials TAPEFORMER_KILL_SEED=$seed OMP_WAIT_POLICY=PASSIVE \
  "$binary" --gtest_filter='Kill.*' --gtest_brief=0
