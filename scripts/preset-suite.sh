#!/usr/bin/env bash
# Configures, builds and tests one CMake preset, as `cmake --workflow --preset P` does, with one
# difference: a build that fails is run once more, alone (one job), before the suite fails. A real
# compile error fails the second build too, with its diagnostic; a compiler killed from outside (a CI
# run once stopped at a test file that compiles cleanly, with no diagnostic at all) gets a second
# chance, and the free memory and disk at the failure are printed so the log says which it was.
# usage: scripts/preset-suite.sh PRESET
set -euo pipefail
preset=${1:?usage: scripts/preset-suite.sh PRESET}
cd "$(dirname "$0")/.."
cmake --preset "$preset"
if ! cmake --build --preset "$preset"; then
  echo "preset-suite: the $preset build failed; memory and disk now:" >&2
  free -m >&2 || true
  df -h . "${TMPDIR:-/tmp}" >&2 || true
  echo "preset-suite: building $preset again with one job" >&2
  cmake --build --preset "$preset" --parallel 1
fi
ctest --preset "$preset"
