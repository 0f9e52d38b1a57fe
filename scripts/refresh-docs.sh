#!/usr/bin/env bash
# Regenerates every figure and screenshot quoted in README.md and docs/ (docs/ci.md, "Docs"):
# the figures between <!-- fig:NAME --> markers (scripts/refresh-docs.py, --timed included) and
# the simview screenshots under docs/images/ (scripts/refresh-screenshots.sh). Builds first.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
cmake --preset release >/dev/null
cmake --build "$build" --target simrun tracediff simview bench_accuracy
python3 scripts/refresh-docs.py --timed --build-dir "$build"
if [ -x scripts/refresh-screenshots.sh ]; then
  scripts/refresh-screenshots.sh "$build"
fi
echo "refresh-docs: review with git diff README.md docs/"
