#!/usr/bin/env bash
# Builds and runs the whole test suite twice: optimised (release preset) and under
# AddressSanitizer + UndefinedBehaviorSanitizer (asan preset). The golden traces are compared
# byte for byte in both builds, which also checks that the simulator is deterministic across presets.
# Then the threaded real-execution tests (the executor on the CPU stand-in device) under
# ThreadSanitizer (tsan preset, which builds only what those tests need). Then the fuzz targets
# for CSIM_CI_FUZZ_SECONDS (default 20) each (scripts/fuzz.sh). Last, the release suite again on a
# clone of the committed tree with nothing beside it (scripts/standalone-check.sh): the repository
# must pass its own tests without ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$jobs}
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$jobs}
# Compile through ccache when it is installed (scripts/install-deps.sh installs it): the cache is
# keyed on paths relative to the checkout, so another clone on this machine reuses it.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi
for preset in release asan tsan; do
  echo "=== tests: preset $preset"
  cmake --workflow --preset "$preset"
done
# Then the input parsers under libFuzzer for a bounded time each (fuzz preset, clang;
# docs/fuzzing.md): a failure stops CI and its input is saved under tests/fuzz_regressions/.
fuzz_seconds=${CSIM_CI_FUZZ_SECONDS:-20}
echo "=== tests: fuzz, ${fuzz_seconds}s per target"
scripts/fuzz.sh "$fuzz_seconds"
# The repository alone (docs/ci.md, "The repository alone"): compiled through the same ccache.
scripts/standalone-check.sh
