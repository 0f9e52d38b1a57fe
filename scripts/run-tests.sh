#!/usr/bin/env bash
# Builds and runs the whole test suite twice: optimised (release preset) and under
# AddressSanitizer + UndefinedBehaviorSanitizer (asan preset). The golden traces are compared
# byte for byte in both builds, which also checks that the simulator is deterministic across presets.
# Then the threaded real-execution tests (the executor on the CPU stand-in device) under
# ThreadSanitizer (tsan preset, which builds only what those tests need).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$jobs}
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$jobs}
for preset in release asan tsan; do
  echo "=== tests: preset $preset"
  cmake --workflow --preset "$preset"
done
