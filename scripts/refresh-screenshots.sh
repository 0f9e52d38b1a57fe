#!/usr/bin/env bash
# Regenerates every simview screenshot under docs/images/ (README.md, docs/simview.md,
# docs/memory.md, docs/hpo.md) from bundled scenarios: each figure is one simrun + one simview
# command below, rendered offscreen under Xvfb (the mechanism of CTest gui:screenshot,
# gui/screenshot_test.sh). scripts/refresh-docs.sh calls it; it builds nothing itself.
#
# Usage: scripts/refresh-screenshots.sh [BUILD_DIR] [NAME.png ...]
#   BUILD_DIR  a configured and built tree with tools/simrun and gui/simview (default build/release)
#   NAME.png   only these images (default: all)
# Needs xvfb-run (apt-get install xvfb xauth). simrun runs in the repository root with relative
# scenario paths (the trace metadata, shown in simview's title bar, then names no build machine's
# folder); traces go to a temporary folder and simview opens them there by their base names, which
# it shows as their labels (dp.json, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
shift $(($# > 0 ? 1 : 0))
only=("$@")
simrun=$build/tools/simrun
simview=$build/gui/simview
images=$root/docs/images
scenarios=scenarios
for exe in "$simrun" "$simview"; do
  [ -x "$exe" ] || { echo "refresh-screenshots: $exe is missing (build it first)" >&2; exit 2; }
done
command -v xvfb-run >/dev/null || { echo "refresh-screenshots: xvfb-run is missing" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"

wanted() {
  [ ${#only[@]} -eq 0 ] && return 0
  local n
  for n in "${only[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}
# shot NAME.png SIMVIEW-ARGS...: render offscreen into docs/images/NAME.png, in the trace folder
shot() {
  local name=$1
  shift
  (cd "$work" && xvfb-run -a -s "-screen 0 1920x1200x24" "$simview" --screenshot "$images/$name" "$@")
}

# README.md, docs/simview.md: DataParallel (A) vs DDP (B), ResNet-50 on 4x GTX 1080 Ti.
if wanted simview_dp_vs_ddp.png || wanted simview_timeline_dp.png; then
  "$simrun" -q "$scenarios/dp_vs_ddp_4x1080ti.json" -o "$work/dp.json"
  "$simrun" -q "$scenarios/dp_vs_ddp_4x1080ti.json" --set strategy.kind=ddp -o "$work/ddp.json"
fi
if wanted simview_dp_vs_ddp.png; then
  shot simview_dp_vs_ddp.png --size 1600x1000 --view compare dp.json ddp.json
fi
# docs/simview.md "Timeline": one DataParallel step.
if wanted simview_timeline_dp.png; then
  shot simview_timeline_dp.png --size 1600x900 --step 2 dp.json
fi

# README.md, docs/simview.md "Memory": GPT-2 small under DataParallel on 8x A100, one y scale
# for every GPU (the default; --memory-scale per-gpu would hide the imbalance).
if wanted simview_memory_dp.png; then
  "$simrun" -q "$scenarios/gpt2_small_8xa100.json" -o "$work/gpt2_dp.json"
  shot simview_memory_dp.png --size 1600x1000 --view memory gpt2_dp.json
fi

# docs/simview.md "Scenario panel" and "Threads, the GIL and processes": the three launch / GIL
# variants of the host-bound MLP (threads + GIL, GIL-free threads, DDP processes) in Compare,
# and the statistics of the first (the host threads' GIL waits).
if wanted simview_launch_variants.png; then
  shot simview_launch_variants.png --size 1500x940 \
    --scenario "$root/scenarios/mlp_gil_4x1080ti.json" --variants
fi
if wanted simview_gil_stats.png; then
  shot simview_gil_stats.png --size 1500x940 \
    --scenario "$root/scenarios/mlp_gil_4x1080ti.json" --variants --view stats
fi

# docs/memory.md "In the viewer": GPT-2 small on one H200 keeping every step's outputs.
if wanted simview_memory_leak.png; then
  "$simrun" -q "$scenarios/gpt2_small_1xh200.json" --set training.steps=6 \
    --set training.leaks.keep_outputs=true -o "$work/leak.json"
  shot simview_memory_leak.png --size 1400x500 --view memory leak.json
fi

# docs/hpo.md "Trace": the ASHA schedule of docs/hpo.md's example.
if wanted simview_hpo_asha.png; then
  "$simrun" hpo "$scenarios/mlp_1xh200.json" --set cluster.gpus_per_node=4 \
    --space training.global_batch=4096,8192 --space param.lr=1e-4,3e-4,1e-3 --trials 27 \
    --seed 1 --max-t 27 --startup-s 0.05 -o "$work/hpo_asha.json" >/dev/null
  shot simview_hpo_asha.png --size 1400x700 hpo_asha.json
fi
# docs/program.md "Context parallel": ring attention of Llama 3.1 8B at 131,072 tokens over 8 H100
# (cp 8, p2p): one attention core's forward in step 2, its 8 ring-step kernels on the compute
# stream while the K/V hops run on the cp stream. The window is read off the trace (the 9th to 16th
# h.4.attn.core.fwd kernels of GPU 0, 2 ms either side), so it follows the model.
if wanted simview_cp_ring.png; then
  "$simrun" -q "$scenarios/llama3_1_8b_8xh100_cp8_p2p.json" -o "$work/cp8_p2p.json"
  range=$(/usr/bin/python3 - "$work/cp8_p2p.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
t0 = min(e["ts"] for e in ev)
core = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "kernel"
              and e.get("args", {}).get("device") == 0 and e["name"] == "h.4.attn.core.fwd")[8:16]
print(f"{(core[0][0] - t0) / 1e3 - 2:.3f}:{(core[-1][1] - t0) / 1e3 + 2:.3f}")
PY
  )
  shot simview_cp_ring.png --size 1600x700 --range "$range" cp8_p2p.json
fi
# docs/transformer.md "Routing imbalance" and docs/simview.md "Compare": the balanced Qwen3-30B-A3B
# scenario (A) against its zipf-routed twin (B) on 16 H100 (ep 8), reduced to 32 sequences and
# 2 steps so the traces stay small; the balanced run without rank symmetry, so that every GPU of
# both runs is drawn. The window is the first MoE layer of the first micro-batch, read off the
# zipf trace (GPU 0's mb0 h.0.mlp.router.fwd to mb0 h.0.mlp.residual.fwd, 0.1 ms either side):
# both runs are identical up to there, so "first events" alignment lines that layer up.
if wanted simview_moe_routing.png; then
  moe=(--set training.global_batch=32 --set training.steps=2)
  "$simrun" -q "$scenarios/mbridge2509_qwen3_30b_a3b_h100_16gpu.json" "${moe[@]}" \
    --set simulation.symmetry=off -o "$work/balanced.json"
  "$simrun" -q "$scenarios/qwen3_30b_a3b_16xh100_ep8_zipf.json" "${moe[@]}" -o "$work/zipf.json"
  range=$(/usr/bin/python3 - "$work/zipf.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
t0 = min(e["ts"] for e in ev)
k = [e for e in ev if e.get("cat") == "kernel" and e.get("args", {}).get("device") == 0]
a = min(e["ts"] for e in k if e["name"] == "mb0 h.0.mlp.router.fwd")
b = min(e["ts"] + e["dur"] for e in k if e["name"] == "mb0 h.0.mlp.residual.fwd")
print(f"{(a - t0) / 1e3 - 0.1:.3f}:{(b - t0) / 1e3 + 0.1:.3f}")
PY
  )
  shot simview_moe_routing.png --size 1600x1200 --view compare --range "$range" balanced.json zipf.json
fi
echo "refresh-screenshots: look at docs/images/simview_*.png (git diff --stat docs/images)"
