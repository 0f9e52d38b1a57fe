#!/usr/bin/env bash
# Runs Holistic Trace Analysis, as a user would, on --per-rank output of DDP, DataParallel, a
# pipeline, a 3D run (mirrors expanded) and a stand-in real run (docs/trace-format.md, "Holistic
# Trace Analysis"). HTA is not part of ClusterSim and is never committed: pass the path of a work
# tree of it (outside this repository) and have Debian's python3-pandas, -numpy, -plotly,
# -networkx, -tqdm and -psutil installed. Three steps each: HTA drops a trace's last ProfilerStep
# (it takes it for a partial one), and two analysed steps keep its statistics defined.
# usage: scripts/hta-check.sh HTA_WORK_TREE [BUILD_DIR] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
hta=${1:?usage: scripts/hta-check.sh HTA_WORK_TREE [BUILD_DIR] [OUT_DIR]}
build=${2:-build/release}
out=${3:-$(mktemp -d -t csim_hta_XXXXXX)}
client=../shared/clients/hta_check.py
required=temporal,overlap,kernels,idle,queue,launch,memory_bw,critical_path
failed=0
run() {
  local name=$1
  shift
  rm -rf "${out:?}/$name"
  echo "=== $name: simrun $*"
  "$build/tools/simrun" "$@" --set training.steps=3 -q --per-rank "$out/$name" --summary "$out/$name.summary.json"
  if ! /usr/bin/python3 "$client" "$out/$name" --hta "$hta" --require "$required"; then failed=1; fi
}
run ddp scenarios/dp_vs_ddp_4x1080ti.json --set strategy.kind=ddp
run data_parallel scenarios/dp_vs_ddp_4x1080ti.json
run pipeline scenarios/gpt_pipeline_8xa100.json
run 3d scenarios/gpt_20b_64xa100_3d.json --set model.gpt.layers=8 --set training.global_batch=32 --expand-mirrors
run standin scenarios/linear_5x2_dp2.json --set strategy.kind=ddp --backend standin --launch processes
echo "hta-check: outputs in $out"
exit $failed
