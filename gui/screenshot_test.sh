#!/bin/sh
# CTest "gui:screenshot": simview renders TRACE offscreen under Xvfb, then
# test_gui_screenshot_check verifies the PNG (not blank, event colours, one lane per model lane).
# Exit 77 (CTest SKIP_RETURN_CODE) when xvfb-run is not installed.
# Usage: screenshot_test.sh SIMVIEW CHECKER TRACE OUT.png
set -eu
simview=$1
checker=$2
trace=$3
out=$4
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "SKIP: xvfb-run is not installed (apt-get install xvfb xauth; scripts/install-deps.sh)"
  exit 77
fi
rm -f "$out"
xvfb-run -a -s "-screen 0 1280x1024x24" "$simview" --screenshot "$out" --size 1400x1000 "$trace"
"$checker" "$out" "$trace"
