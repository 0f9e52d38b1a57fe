#!/usr/bin/env bash
# Regenerates the golden outputs under traces/ (listed in traces/goldens.txt) after an intended
# change of the simulator or cost model, and prints what changed. Review with `git diff traces/`.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target golden_refresh
./build/release/tools/golden_refresh .
