#!/usr/bin/env bash
# The real-GPU check (docs/real-execution.md, "GPU check"): on a machine with one NVIDIA GPU it
# runs the GPU tests, simulated-vs-real comparisons of the single-GPU bundled scenarios, and, where
# PyTorch is installed, the PyTorch equivalent of each under torch.profiler diffed against the
# simulation; it prints a short table last. Budget: under 6 minutes (each step has a timeout).
#
# Such a machine may have CUDA, CMake and Python but none of our Debian libraries and no network:
# the binaries come from scripts/gpu-bundle.sh run elsewhere (gpu-bundle/bin); only if they do not
# start is a local build tried. Results go to $OUT (default gpu-check-out/).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
log="$out/gpu-check.log"
: >"$log"
rows=()
row() { rows+=("$1|$2|$3"); }
say() { echo "== $*" | tee -a "$log"; }

# [SECTION] Libraries: CUDA's (runtime, cuBLAS, CUPTI), and NCCL and CUPTI from the toolkit or
# from PyTorch's nvidia-* wheels.
cuda_home=${CUDA_HOME:-/usr/local/cuda}
libs="$cuda_home/lib64:$cuda_home/lib:$cuda_home/extras/CUPTI/lib64"
wheel_dirs=$(python3 - 2>/dev/null <<'PY'
import importlib, os
for m in ("nvidia.nccl", "nvidia.cuda_cupti"):
    try:
        print(os.path.join(list(importlib.import_module(m).__path__)[0], "lib"))
    except Exception:
        pass
PY
)
for d in $wheel_dirs; do libs="$libs:$d"; done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# [SECTION] Binaries
bin=gpu-bundle/bin
if ! "$bin/simrun" --help >/dev/null 2>>"$log"; then
  say "bundled binaries do not start here; trying a local build (needs our Debian libraries)"
  if timeout 240 cmake -S . -B build/gpu-local -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCSIM_BUILD_GUI=OFF >>"$log" 2>&1 &&
     timeout 240 cmake --build build/gpu-local --target simrun tracediff tests_cuda tests_real \
      >>"$log" 2>&1; then
    mkdir -p build/gpu-local/bin
    cp build/gpu-local/tools/simrun build/gpu-local/tools/tracediff \
      build/gpu-local/tests/cuda/tests_cuda build/gpu-local/tests/tests_real build/gpu-local/bin/
    bin=build/gpu-local/bin
  else
    row build "FAILED" "neither gpu-bundle/bin nor a local build runs (see $log)"
  fi
fi

# [SECTION] The machine
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>>"$log" | head -1)
row gpu "${gpu:-none}" "nvidia-smi"

# [SECTION] Tests: the CUDA runtime's [gpu] tests, and the stand-in executor
for t in tests_cuda tests_real; do
  say "$t"
  timeout 120 "$bin/$t" >"$out/$t.txt" 2>&1
  code=$?
  case $code in
    0) row "$t" passed "$(grep -E 'All tests passed|test cases' "$out/$t.txt" | tail -1)" ;;
    77) row "$t" "SKIPPED" "$(grep -E 'SKIPPED' "$out/$t.txt" | head -1)" ;;
    *) row "$t" "FAILED ($code)" "$(grep -E 'test cases|FAILED' "$out/$t.txt" | tail -1)" ;;
  esac
done

# [SECTION] Simulated vs real, per scenario
for s in mlp_1xh200 gpt2_small_1xh200; do
  say "compare $s"
  if timeout 90 "$bin/simrun" compare "scenarios/$s.json" --backend cuda -o "$out/$s" \
      >"$out/$s.compare.txt" 2>&1; then
    row "compare $s" ok "$(grep -E '^whole run' "$out/$s.compare.txt")"
  else
    row "compare $s" "FAILED" "$(tail -1 "$out/$s.compare.txt")"
  fi
done

# [SECTION] One rank of a large run: GPU 0 of GPT-3 175B on 1,024 GPUs (as H200s), its kernels at
# their true sizes on this GPU, the rest of the cluster simulated (simrun --ranks).
say "ranks 0 of gpt3_175b_1024xa100_3d"
if timeout 120 "$bin/simrun" scenarios/gpt3_175b_1024xa100_3d.json --set cluster.gpu=H200-SXM-141GB \
    --backend cuda --ranks 0 -o "$out/gpt3_rank0.cuda.json" >"$out/gpt3_rank0.txt" 2>&1 &&
   timeout 60 "$bin/simrun" scenarios/gpt3_175b_1024xa100_3d.json --set cluster.gpu=H200-SXM-141GB \
    -q --summary "$out/gpt3_sim.summary.json" >>"$out/gpt3_rank0.txt" 2>&1; then
  row "ranks 0 gpt3_175b (H200)" ok "$(grep -E '^step time' "$out/gpt3_rank0.txt" | head -1) (sim: $(grep -o '"step_time_s": [0-9.e-]*' "$out/gpt3_sim.summary.json"))"
else
  row "ranks 0 gpt3_175b (H200)" "FAILED" "$(tail -1 "$out/gpt3_rank0.txt")"
fi

# [SECTION] Launch mode processes on the GPU: a forked rank opens its own CUDA runtime, reports
# completions from its event poller and its timings through the coordinator. (NCCL across
# processes needs two GPUs: NCCL refuses two ranks on one device, so one GPU cannot check it.)
say "processes mlp_1xh200"
if timeout 90 "$bin/simrun" scenarios/mlp_1xh200.json --backend cuda --launch processes \
    -o "$out/mlp_processes.cuda.json" >"$out/mlp_processes.txt" 2>&1; then
  row "processes mlp_1xh200" ok "$(grep -E '^step time' "$out/mlp_processes.txt" | head -1)"
else
  row "processes mlp_1xh200" "FAILED" "$(tail -1 "$out/mlp_processes.txt")"
fi

# [SECTION] CUPTI tracing overhead (benchmark, target < 2 %): the GPT-2-small step untraced and
# traced, three runs each, median step time of each set (simrun's "step time" is itself the median
# of steps 2..N).
say "cupti overhead gpt2_small_1xh200"
plain=(); traced=()
for i in 1 2 3; do
  plain+=("$(timeout 60 "$bin/simrun" scenarios/gpt2_small_1xh200.json --backend cuda 2>>"$log" |
    awk '/^step time:/ {print $3}')")
  traced+=("$(timeout 60 "$bin/simrun" scenarios/gpt2_small_1xh200.json --backend cuda --cupti \
    2>>"$log" | awk '/^step time:/ {print $3}')")
done
median3() { printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g | sed -n 2p; }
p_ms=$(median3 "${plain[@]}"); t_ms=$(median3 "${traced[@]}")
if [ -n "$p_ms" ] && [ -n "$t_ms" ]; then
  row "cupti overhead gpt2_small" ok "untraced $p_ms ms, traced $t_ms ms: $(awk -v a="$p_ms" -v b="$t_ms" 'BEGIN {printf "%+.2f %%", (b / a - 1) * 100}') (target < 2 %)"
else
  row "cupti overhead gpt2_small" "FAILED" "untraced: ${plain[*]:-none}; traced: ${traced[*]:-none}"
fi

# [SECTION] Calibration: GEMM, element-wise, copies and launch latency measured through the real
# executor, fitted into a device profile, then the compare re-run with that profile.
say "calibrate"
if timeout 200 "$bin/simrun" calibrate scenarios/mlp_1xh200.json --backend cuda --quick \
    -o "$out/h200.profile.json" >"$out/calibrate.txt" 2>&1; then
  # Achieved GEMM efficiency against the catalog's peak, and bandwidths against the device's
  # figures (the benchmark rows of the issue): the calibration table's own lines.
  row calibrate ok "$(grep -E '^(gemm bf16|memory bandwidth|h2d pinned|kernel overhead)' \
    "$out/calibrate.txt" | tr -s ' ' | paste -sd ';' -)"
  if timeout 90 "$bin/simrun" compare scenarios/mlp_1xh200.json --backend cuda \
      --device-profile "$out/h200.profile.json" -o "$out/mlp_calibrated" \
      >"$out/mlp_calibrated.compare.txt" 2>&1; then
    row "compare mlp_1xh200 (calibrated)" ok "$(grep -E '^whole run' "$out/mlp_calibrated.compare.txt")"
  else
    row "compare mlp_1xh200 (calibrated)" "FAILED" "$(tail -1 "$out/mlp_calibrated.compare.txt")"
  fi
else
  row calibrate "FAILED" "$(tail -1 "$out/calibrate.txt")"
fi

# [SECTION] PyTorch ground truth: the same scenario in PyTorch under torch.profiler
if python3 -c "import torch; assert torch.cuda.is_available()" >>"$log" 2>&1; then
  for s in mlp_1xh200 gpt2_small_1xh200; do
    say "torch $s"
    if timeout 120 python3 scripts/torch_equivalent.py "scenarios/$s.json" \
        --out "$out/$s.torch.json" >"$out/$s.torch.txt" 2>&1; then
      step=$(grep -E '^median step' "$out/$s.torch.txt")
      timeout 60 "$bin/tracediff" "$out/$s.sim.json" "$out/$s.torch.json" \
        >"$out/$s.diff.txt" 2>&1
      row "torch $s" ok "$step; $(grep -E 'step_time' "$out/$s.diff.txt" | head -1 | tr -s ' ')"
    else
      row "torch $s" "FAILED" "$(tail -1 "$out/$s.torch.txt")"
    fi
  done
else
  row torch "skipped" "no PyTorch with CUDA here"
fi

# [SECTION] Summary
echo
printf '%-40s %-16s %s\n' check result detail
for r in "${rows[@]}"; do
  IFS='|' read -r a b c <<<"$r"
  printf '%-40s %-16s %s\n' "$a" "$b" "$c"
done
