#!/usr/bin/env bash
# CTest hta:check (tests/CMakeLists.txt): Holistic Trace Analysis's eight analyses
# (scripts/hta_check.py) on `simrun --per-rank` of llama3_1_8b_8xh100_fsdp2 as bundled: 8 ranks
# written from 1 simulated GPU (rank symmetry's mirrors), 3 steps, so HTA analyses 2 and its memory
# bandwidth has 2 samples per rank (at 2 steps it had 1, and a NaN deviation). HTA is never
# committed: without a work tree of it (CSIM_HTA_DIR at configure time, else HTA_DIR when the test
# runs) or its Python packages, this exits 77, which CTest reports as skipped.
# usage: hta_check_test.sh SIMRUN SOURCE_DIR [HTA_WORK_TREE]
set -uo pipefail
simrun=$1 src=$2 hta=${3:-${HTA_DIR:-}}
if [[ -z $hta || ! -d $hta/hta ]]; then
  echo "skipped: no HTA work tree (configure with -DCSIM_HTA_DIR=DIR or set HTA_DIR=DIR, DIR holding hta/)"
  exit 77
fi
if [[ ! -x /usr/bin/python3 ]]; then
  echo "skipped: /usr/bin/python3 (Debian's, with python3-pandas and the others) is absent"
  exit 77
fi
tmp=$(mktemp -d -t csim_hta_test_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$simrun" "$src/scenarios/llama3_1_8b_8xh100_fsdp2.json" -q --per-rank "$tmp/ranks" || exit 1
files=$(find "$tmp/ranks" -name 'rank-*.json' | wc -l)
if [[ $files -ne 8 ]]; then
  echo "FAIL: --per-rank wrote $files files for 8 ranks"
  exit 1
fi
/usr/bin/python3 "$src/scripts/hta_check.py" "$tmp/ranks" --hta "$hta"
rc=$?
if [[ $rc -eq 2 ]]; then
  echo "skipped: HTA or its packages cannot be imported (above)"
  exit 77
fi
exit $rc
