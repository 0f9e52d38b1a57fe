#!/usr/bin/env bash
# The repository stands alone: clones the committed tree into a scratch folder with nothing beside
# it (no ../shared: no published measurements, no PyTorch-profiler fixtures, no HTA client) and
# runs the release suite there. Cases that need the real PyTorch-profiler traces, which may not be
# committed, are reported by CTest as skipped (tests/kineto_fixtures.hpp); every other test must
# pass. With CSIM_STANDALONE_FIXTURES=DIR (scripts/run-tests.sh sets it to ../shared's fixtures
# when the checkout has them) those cases (label kineto_fixtures) then run again in the clone's
# build with the fixtures of DIR, and must pass. .ci/run runs it as the release suite (docs/ci.md,
# "The repository alone").
# usage: scripts/standalone-check.sh [SCRATCH_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-$(mktemp -d -t csim_alone_XXXXXX)}
clone="$scratch/clustersim"
rm -rf "$clone"
git clone -q --no-hardlinks "$PWD" "$clone"
if [ -e "$scratch/shared" ]; then
  echo "standalone-check: $scratch/shared exists; the clone must have nothing beside it" >&2
  exit 2
fi
echo "=== standalone: release suite on a clone at $(git -C "$clone" rev-parse --short HEAD) in $clone, no ../shared"
cd "$clone"
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CCACHE_BASEDIR="$clone"
fi
jobs=$(nproc 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$jobs}
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$jobs}
log="$scratch/ctest.log"
scripts/preset-suite.sh release 2>&1 | tee "$log"
# Skips are listed: the Kineto fixture cases, and what this machine lacks (GPU, display), as in
# the suite with ../shared.
echo "standalone-check: ok; skipped here:"
grep -E '\*\*\*Skipped' "$log" || echo "  (none)"
if [ -n "${CSIM_STANDALONE_FIXTURES:-}" ]; then
  echo "=== standalone: the kineto_fixtures cases with the fixtures of $CSIM_STANDALONE_FIXTURES"
  CSIM_KINETO_FIXTURES="$CSIM_STANDALONE_FIXTURES" ctest --preset release -L kineto_fixtures
fi
