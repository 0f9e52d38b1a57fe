#!/usr/bin/env bash
# Builds and runs the whole test suite twice. First optimised (release preset) on a clone of the
# committed tree with nothing beside it (scripts/standalone-check.sh): the repository must pass its
# own tests without ../shared; the cases that read the real PyTorch-profiler traces then run again
# there with this checkout's ../shared/fixtures/kineto, when it has them. Then under
# AddressSanitizer + UndefinedBehaviorSanitizer (asan preset). The golden traces are compared byte
# for byte in both builds, which also checks that the simulator is deterministic across presets.
# Then the threaded real-execution tests (the executor on the CPU stand-in device) under
# ThreadSanitizer (tsan preset, which builds only what those tests need). Last, the fuzz targets
# for CSIM_CI_FUZZ_SECONDS (default 20) each (scripts/fuzz.sh). Each phase prints its wall time.
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
  # The tests' precompiled header (tests/CMakeLists.txt, csim_test_pch) is cached only with these
  # two sloppiness settings (ccache's manual, "Precompiled headers").
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros}
fi
phase_start=$SECONDS
phase_done() { echo "=== tests: $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }
# The repository alone (docs/ci.md, "The repository alone"): the release suite, compiled through
# the same ccache, with nothing beside the clone; then the fixture cases with ../shared's fixtures.
fixtures="$PWD/../shared/fixtures/kineto"
if [ -d "$fixtures" ]; then
  CSIM_STANDALONE_FIXTURES="$fixtures" scripts/standalone-check.sh
else
  scripts/standalone-check.sh
fi
phase_done "release (standalone clone)"
for preset in asan tsan; do
  echo "=== tests: preset $preset"
  scripts/preset-suite.sh "$preset"
  phase_done "preset $preset"
done
# Then the input parsers under libFuzzer for a bounded time each (fuzz preset, clang;
# docs/fuzzing.md): a failure stops CI and its input is saved under tests/fuzz_regressions/.
fuzz_seconds=${CSIM_CI_FUZZ_SECONDS:-20}
echo "=== tests: fuzz, ${fuzz_seconds}s per target"
scripts/fuzz.sh "$fuzz_seconds"
phase_done "fuzz"
