#!/usr/bin/env bash
# The real-GPU check (docs/gpu-check.md): on a machine with an NVIDIA GPU it runs the GPU tests,
# the calibration, simulated-vs-real comparisons of the single-GPU bundled scenarios (as H200s),
# one rank of GPT-3 175B, the CUPTI overhead and, where PyTorch sees the GPU, the PyTorch
# equivalent of each scenario under torch.profiler diffed against the simulation.
#
# The binaries come from scripts/gpu-bundle.sh run elsewhere (gpu-bundle/, carried). Results:
#   $OUT/summary.txt        one row per check, appended as each is measured
#   $OUT/gpu-check.tar.gz   $OUT/work (every log, trace and profile, and the stage state), packed
#                           after each stage and on exit; $OUT/work is then removed
# so a run cut short still returns its rows, in two files.
#
# Time: a global deadline (GPU_CHECK_BUDGET_S, default 330 s) and a budget per stage (the sum is
# 325 s); every command runs under `timeout -k 5` (SIGTERM, then SIGKILL 5 s later: a thread stuck
# in cudaEventSynchronize or NCCL never sees simrun's cancel flag), with the smaller of what is
# left of its stage and of the whole run.
#
# Resumable: a stage that passed leaves a marker (with its rows) in the state directory, and a
# rerun skips it, repeating its rows marked "[done earlier]". The state lives outside $OUT (which
# the GPU machine empties before every call): GPU_CHECK_STATE, default /tmp/csim-gpu-check-state,
# which lasts while the machine stays warm. For a rerun on a fresh machine, put the tarball a
# previous run returned at gpu-bundle/resume.tar.gz (or name it in GPU_CHECK_RESUME): its state
# is restored when the state directory is empty. GPU_CHECK_FRESH=1 starts over.
#
# Exit status: 0 when every check passed or was skipped for want of a GPU; 1 when one failed; 2
# when the script itself could not run (no bundle, no writable $OUT).
# shellcheck disable=SC2317 # the stage functions are called through stage()
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD
out=${OUT:-$root/out/gpu-check}
work=$out/work
state=${GPU_CHECK_STATE:-/tmp/csim-gpu-check-state}
resume=${GPU_CHECK_RESUME:-$root/gpu-bundle/resume.tar.gz}
budget_s=${GPU_CHECK_BUDGET_S:-330}
deadline=$((SECONDS + budget_s))
bin=$root/gpu-bundle/bin
h200=H200-SXM-141GB

if [ "${GPU_CHECK_FRESH:-0}" = 1 ]; then rm -rf "$state"; fi
rm -rf "$work"
mkdir -p "$work" "$state" || exit 2
summary=$out/summary.txt
log=$work/gpu-check.log
: >"$summary" || exit 2
: >"$log" || exit 2
failed=0

# [SECTION] Output: rows, packing, the exit trap
say() { echo "== $*" | tee -a "$log"; }
# row CHECK RESULT DETAIL: appended to the summary now, and to the stage's rows.
row() {
  local line
  line=$(printf '%-36s %-18s %s' "$1" "$2" "$3")
  echo "$line" | tee -a "$summary" "$log"
  if [ -n "${stage_rows:-}" ]; then echo "$line" >>"$stage_rows"; fi
}
ok() { row "$1" ok "$2"; }
# bad CHECK RESULT DETAIL: a failed row; the stage is not marked done.
bad() {
  row "$1" "$2" "$3"
  stage_failed=1
  failed=1
}
# skip CHECK DETAIL: not run for want of a GPU (not a failure; the stage is not marked done).
skip() {
  row "$1" SKIPPED "$2"
  stage_failed=1
}
pack() {
  if ! { mkdir -p "$work/state" && cp -rp "$state/." "$work/state/"; } 2>>"$log"; then
    echo "gpu-check: could not copy $state into $work/state" >&2
  fi
  if tar -czf "$out/gpu-check.tar.gz.part" -C "$out" work 2>>"$log" &&
    mv -f "$out/gpu-check.tar.gz.part" "$out/gpu-check.tar.gz"; then
    return 0
  fi
  echo "gpu-check: packing $work into $out/gpu-check.tar.gz failed" >&2
  return 1
}
on_exit() {
  local code=$?
  trap - EXIT
  if pack && [ "${GPU_CHECK_KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; fi
  echo
  cat "$summary"
  echo "gpu-check: $summary; everything else in $out/gpu-check.tar.gz"
  exit "$code"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# [SECTION] Time: the global deadline, stage budgets, one command under both
stage_end=$deadline
left_s() {
  local until=$stage_end
  ((deadline < until)) && until=$deadline
  echo $((until - SECONDS))
}
# run LOGFILE CMD...: CMD under `timeout -k 5` with what is left, its output in LOGFILE; returns
# its exit status (124: timed out, 137: killed 5 s after).
run() {
  local logfile=$1 t
  shift
  t=$(left_s)
  if ((t < 2)); then
    echo "gpu-check: no time left for: $*" >"$logfile"
    return 124
  fi
  echo "\$ timeout -k 5 $t $*" >>"$log"
  timeout -k 5 "$t" "$@" >"$logfile" 2>&1
}
# What an exit status means, for a row.
status_text() {
  case $1 in
    124) echo "TIMEOUT" ;;
    137) echo "KILLED (timeout)" ;;
    77) echo "SKIPPED (77)" ;;
    *) echo "FAILED ($1)" ;;
  esac
}
# The last line of a file worth quoting in a row.
last_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -1 | cut -c1-160; }

# stage NAME BUDGET_S FUNCTION: runs FUNCTION unless a marker says it passed before; marks it
# done when none of its rows failed or skipped.
stage() {
  local name=$1 budget=$2 fn=$3
  if [ -f "$state/$name.done" ]; then
    sed 's/$/  [done earlier]/' "$state/$name.done" | tee -a "$summary" "$log"
    return 0
  fi
  if (($(left_s) < 3)); then
    row "$name" "NOT REACHED" "the global deadline (${budget_s} s) passed first"
    failed=1
    return 0
  fi
  stage_end=$((SECONDS + budget))
  stage_rows=$state/$name.rows
  : >"$stage_rows"
  stage_failed=0
  say "$name (budget ${budget} s, $((deadline - SECONDS)) s left in all)"
  "$fn"
  if ((stage_failed == 0)); then mv -f "$stage_rows" "$state/$name.done"; fi
  stage_rows=
  stage_end=$deadline
  pack || true
}

# [SECTION] Resume: a previous run's state, when this machine has none
if [ -z "$(ls -A "$state")" ] && [ -f "$resume" ]; then
  tmp=$(mktemp -d)
  if tar -xzf "$resume" -C "$tmp" work/state 2>>"$log" && cp -p "$tmp"/work/state/* "$state"/; then
    done_stages=("$state"/*.done)
    say "resumed from $resume: ${#done_stages[@]} stage marker(s) restored"
  else
    say "could not restore the state from $resume; running every stage"
  fi
  rm -rf "$tmp"
fi

# [SECTION] Libraries: the CUDA toolkit's, then PyTorch's nvidia wheels (site-packages/nvidia/
# cu13/lib for the CUDA 13 ones, nvidia/<name>/lib for NCCL and the older layout), found now.
cuda_home=${CUDA_HOME:-/usr/local/cuda}
lib_dirs=()
add_dir() {
  local d
  for d in "$@"; do
    [ -d "$d" ] || continue
    case ":$(
      IFS=:
      echo "${lib_dirs[*]}"
    ):" in *":$d:"*) continue ;; esac
    lib_dirs+=("$d")
  done
}
add_dir "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/extras/CUPTI/lib64"
site_dirs=$(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>>"$log")
while IFS= read -r sp; do
  [ -n "$sp" ] || continue
  add_dir "$sp"/nvidia/cu13/lib "$sp"/nvidia/*/lib
done <<<"$site_dirs"
lib_path=$(
  IFS=:
  echo "${lib_dirs[*]}"
)
export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CSIM_SOURCE_DIR=$root # the test binaries read scenarios from this tree, not the build's

# [SECTION] Stages
gpus=0
torch_cuda=0

stage_env() {
  # First: what the dynamic linker cannot find (an empty list is the good answer).
  local missing rc
  {
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    for f in "$bin"/*; do
      echo "== ldd $f"
      ldd "$f" || echo "(ldd exited $?)"
    done
  } >"$work/ldd.txt" 2>&1
  missing=$(ldd "$bin/simrun" 2>&1 | grep "not found")
  echo "ldd simrun | grep 'not found': ${missing:-(none)}" | tee -a "$log"
  missing=$(grep "not found" "$work/ldd.txt" | sort -u | tr -s ' \t' ' ' | paste -sd ';' -)
  if [ -n "$missing" ]; then
    bad libraries MISSING "$missing"
  else
    ok libraries "every bundled binary's libraries found (${#lib_dirs[@]} dirs on LD_LIBRARY_PATH)"
  fi
  run "$work/simrun-help.txt" "$bin/simrun" --help
  rc=$?
  if ((rc != 0)); then
    bad simrun "$(status_text "$rc")" "does not start: $(last_line "$work/simrun-help.txt")"
  fi
  local smi
  smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
    --format=csv,noheader 2>>"$log")
  gpus=$(nvidia-smi -L 2>>"$log" | grep -c '^GPU')
  nvidia-smi >"$work/nvidia-smi.txt" 2>&1 || echo "(nvidia-smi exited $?)" >>"$work/nvidia-smi.txt"
  if ((gpus > 0)); then
    ok gpu "$gpus x $(echo "$smi" | head -1)"
  else
    row gpu "none" "nvidia-smi finds no GPU: the GPU checks are skipped"
  fi
  if run "$work/torch.txt" python3 -c \
    "import torch; assert torch.cuda.is_available(); print(torch.__version__)"; then
    torch_cuda=1
    ok torch "PyTorch $(cat "$work/torch.txt") sees the GPU"
  else
    row torch "none" "no PyTorch with CUDA here: $(last_line "$work/torch.txt")"
  fi
}

stage_tests_cuda() {
  # One GPU: the [2gpu] tests are left out (each would skip itself anyway). None: the [cuda]
  # tests alone (the first [gpu] test would exit 77 and end the rest), and the row says skipped.
  local spec=() rc
  ((gpus < 2)) && spec=('~[2gpu]')
  ((gpus == 0)) && spec=('~[gpu]')
  run "$work/tests_cuda.txt" "$bin/tests_cuda" "${spec[@]}"
  rc=$?
  local tally
  tally=$(grep -E 'All tests passed|test cases' "$work/tests_cuda.txt" | tail -1)
  case $rc in
    0) if ((gpus == 0)); then
      skip tests_cuda "no GPU: [gpu] tests not run; ${spec[*]} $tally"
    else
      ok tests_cuda "${spec[*]:-all} $tally"
    fi ;;
    77) skip tests_cuda "$(grep -m1 'SKIPPED' "$work/tests_cuda.txt")" ;;
    *) bad tests_cuda "$(status_text "$rc")" "$tally $(grep -m1 -B1 'FAILED' "$work/tests_cuda.txt" | tr '\n' ' ')" ;;
  esac
}

stage_tests_real() {
  local rc
  run "$work/tests_real.txt" "$bin/tests_real"
  rc=$?
  local tally
  tally=$(grep -E 'All tests passed|test cases' "$work/tests_real.txt" | tail -1)
  if ((rc == 0)); then ok tests_real "$tally"; else bad tests_real "$(status_text "$rc")" "$tally"; fi
}

# simrun on the GPU, or a skip row when there is none. Returns 1 when it skipped.
need_gpu() {
  if ((gpus == 0)); then
    skip "$1" "no GPU"
    return 1
  fi
}
profile_args() {
  if [ -f "$state/h200.profile.json" ]; then echo "--device-profile $state/h200.profile.json"; fi
}

stage_calibrate() {
  need_gpu calibrate || return 0
  local rc
  run "$work/calibrate.txt" "$bin/simrun" calibrate scenarios/mlp_1xh200.json --backend cuda \
    --quick -o "$work/h200.profile.json"
  rc=$?
  if ((rc == 0)) && cp "$work/h200.profile.json" "$state/h200.profile.json"; then
    ok calibrate "$(grep -E '^(gemm bf16|memory bandwidth|h2d pinned|kernel overhead)' \
      "$work/calibrate.txt" | tr -s ' ' | paste -sd ';' -)"
  else
    bad calibrate "$(status_text "$rc")" "$(last_line "$work/calibrate.txt")"
  fi
}

compare_one() {
  local s=$1 rc
  need_gpu "compare $s" || return 0
  # shellcheck disable=SC2046 # profile_args is zero or two words
  run "$work/$s.compare.txt" "$bin/simrun" compare "scenarios/$s.json" --backend cuda \
    --set "cluster.gpu=$h200" $(profile_args) -o "$work/$s"
  rc=$?
  if ((rc == 0)); then
    ok "compare $s" "$(grep -E '^whole run' "$work/$s.compare.txt" | tr -s ' ')$([ -f "$state/h200.profile.json" ] && echo ' (calibrated)')"
  else
    bad "compare $s" "$(status_text "$rc")" "$(last_line "$work/$s.compare.txt")"
  fi
}
stage_compare_single_gpu_linear() { compare_one single_gpu_linear; }
stage_compare_mlp_1xh200() { compare_one mlp_1xh200; }
stage_compare_gpt2_small_1xh200() { compare_one gpt2_small_1xh200; }

stage_ranks0_gpt3() {
  need_gpu "ranks 0 gpt3_175b (H200)" || return 0
  local s=scenarios/gpt3_175b_1024xa100_3d.json rc
  run "$work/gpt3_rank0.txt" "$bin/simrun" "$s" --set "cluster.gpu=$h200" --backend cuda \
    --ranks 0 -o "$work/gpt3_rank0.cuda.json" --summary "$work/gpt3_rank0.summary.json"
  rc=$?
  if ((rc != 0)); then
    bad "ranks 0 gpt3_175b (H200)" "$(status_text "$rc")" "$(last_line "$work/gpt3_rank0.txt")"
    return 0
  fi
  run "$work/gpt3_sim.txt" "$bin/simrun" "$s" --set "cluster.gpu=$h200" -q \
    --summary "$work/gpt3_sim.summary.json"
  rc=$?
  if ((rc != 0)); then
    bad "ranks 0 gpt3_175b (H200)" "$(status_text "$rc")" "simulation: $(last_line "$work/gpt3_sim.txt")"
    return 0
  fi
  ok "ranks 0 gpt3_175b (H200)" "$(grep -m1 -E '^step time' "$work/gpt3_rank0.txt") (sim: $(grep -o '"step_time_s": [0-9.e+-]*' "$work/gpt3_sim.summary.json" | head -1))"
}

stage_cupti_overhead() {
  # GPT-2 small untraced and traced, alternating, up to three pairs; the median (or the lower of
  # two) of each: simrun's "step time" is itself the median of steps 2..N.
  need_gpu "cupti overhead gpt2_small" || return 0
  local plain=() traced=() i rc p t
  for i in 1 2 3; do
    run "$work/cupti_plain_$i.txt" "$bin/simrun" scenarios/gpt2_small_1xh200.json --backend cuda
    rc=$?
    p=$(awk '/^step time:/ {print $3; exit}' "$work/cupti_plain_$i.txt")
    if ((rc != 0)) || [ -z "$p" ]; then break; fi
    run "$work/cupti_traced_$i.txt" "$bin/simrun" scenarios/gpt2_small_1xh200.json --backend cuda \
      --cupti
    rc=$?
    t=$(awk '/^step time:/ {print $3; exit}' "$work/cupti_traced_$i.txt")
    if ((rc != 0)) || [ -z "$t" ]; then break; fi
    plain+=("$p")
    traced+=("$t")
  done
  if ((${#plain[@]} == 0)); then
    bad "cupti overhead gpt2_small" "$(status_text "$rc")" "no untraced/traced pair finished: $(last_line "$work/cupti_traced_1.txt")"
    return 0
  fi
  local pm tm
  pm=$(printf '%s\n' "${plain[@]}" | sort -g | sed -n "$(((${#plain[@]} + 1) / 2))p")
  tm=$(printf '%s\n' "${traced[@]}" | sort -g | sed -n "$(((${#traced[@]} + 1) / 2))p")
  ok "cupti overhead gpt2_small" "untraced $pm ms, traced $tm ms over ${#plain[@]} pair(s): $(awk -v a="$pm" -v b="$tm" 'BEGIN {printf "%+.2f %%", (b / a - 1) * 100}') (target < 2 %)"
}

torch_one() {
  local s=$1 rc
  if ((torch_cuda == 0)); then
    skip "torch $s" "no PyTorch with CUDA here"
    return 0
  fi
  # The simulation to diff against, made here so that this stage stands alone on a rerun.
  # shellcheck disable=SC2046 # profile_args is zero or two words
  run "$work/$s.sim.txt" "$bin/simrun" "scenarios/$s.json" --set "cluster.gpu=$h200" \
    $(profile_args) -q -o "$work/$s.torchsim.json"
  rc=$?
  if ((rc != 0)); then
    bad "torch $s" "$(status_text "$rc")" "simulation: $(last_line "$work/$s.sim.txt")"
    return 0
  fi
  run "$work/$s.torch.txt" env PYTHONUNBUFFERED=1 python3 scripts/torch_equivalent.py \
    "scenarios/$s.json" --out "$work/$s.torch.json"
  rc=$?
  if ((rc != 0)); then
    bad "torch $s" "$(status_text "$rc")" "$(last_line "$work/$s.torch.txt")"
    return 0
  fi
  # tracediff: 0 within tolerance, 1 differs beyond it (expected: PyTorch's kernels are not the
  # simulator's), 2 bad input. Either of the first two with a report is a result.
  run "$work/$s.diff.txt" "$bin/tracediff" "$work/$s.torchsim.json" "$work/$s.torch.json"
  rc=$?
  if ((rc == 0 || rc == 1)) && [ -s "$work/$s.diff.txt" ]; then
    ok "torch $s" "$(grep -m1 -E '^median step' "$work/$s.torch.txt"); tracediff $rc: $(grep -m1 -E 'step_time' "$work/$s.diff.txt" | tr -s ' ')"
  else
    bad "torch $s" "tracediff $(status_text "$rc")" "$(last_line "$work/$s.diff.txt")"
  fi
}
stage_torch_single_gpu_linear() { torch_one single_gpu_linear; }
stage_torch_mlp_1xh200() { torch_one mlp_1xh200; }
stage_torch_gpt2_small_1xh200() { torch_one gpt2_small_1xh200; }

stage_processes_mlp() {
  # Launch mode processes on the GPU: a forked rank's own CUDA runtime and completion poller.
  # (NCCL across processes needs two GPUs: NCCL refuses two ranks on one device.)
  need_gpu "processes mlp_1xh200" || return 0
  local rc
  run "$work/mlp_processes.txt" "$bin/simrun" scenarios/mlp_1xh200.json --backend cuda \
    --launch processes -o "$work/mlp_processes.cuda.json"
  rc=$?
  if ((rc == 0)); then
    ok "processes mlp_1xh200" "$(grep -m1 -E '^step time' "$work/mlp_processes.txt")"
  else
    bad "processes mlp_1xh200" "$(status_text "$rc")" "$(last_line "$work/mlp_processes.txt")"
  fi
}

# [SECTION] The run, in order of value. Budgets (s): 15 + 40 + 20 + 50 + (10 + 20 + 30) + 40 +
# 35 + (15 + 20 + 30) = 325, under the 330 s deadline; the launch-mode check last, if time is left.
printf '%-36s %-18s %s\n' check result detail | tee -a "$summary"
if [ ! -x "$bin/simrun" ]; then
  row bundle MISSING "no $bin/simrun: run scripts/gpu-bundle.sh and carry gpu-bundle"
  exit 2
fi
stage_rows=
stage_failed=0
stage_end=$((SECONDS + 15))
stage_env # every run: the machine, the libraries, the GPU count the later stages need
stage_end=$deadline
pack || true
stage tests_cuda 40 stage_tests_cuda
stage tests_real 20 stage_tests_real
stage calibrate 50 stage_calibrate
stage compare_single_gpu_linear 10 stage_compare_single_gpu_linear
stage compare_mlp_1xh200 20 stage_compare_mlp_1xh200
stage compare_gpt2_small_1xh200 30 stage_compare_gpt2_small_1xh200
stage ranks0_gpt3 40 stage_ranks0_gpt3
stage cupti_overhead 35 stage_cupti_overhead
stage torch_single_gpu_linear 15 stage_torch_single_gpu_linear
stage torch_mlp_1xh200 20 stage_torch_mlp_1xh200
stage torch_gpt2_small_1xh200 30 stage_torch_gpt2_small_1xh200
stage processes_mlp 15 stage_processes_mlp
exit "$failed"
