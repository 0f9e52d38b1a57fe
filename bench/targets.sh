#!/usr/bin/env bash
# Issue 17's speed targets, measured (CPU seconds and peak RSS from /usr/bin/time), for one or two
# sets of binaries side by side (before, after). Not a test: figures are quoted as measured.
#   bench/targets.sh DIR [DIR2]   DIR holds simrun, bench_trace_io, bench_sweep and, when built,
#                                 bench_block_eval (copies or links of build/release/{tools,bench}/)
# Prints one "name before [after]" line per figure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g3="$root/scenarios/gpt3_175b_1024xa100_3d.json"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# cpu_rss CMD...: "CPU_s RSS_MiB" of one run
cpu_rss() { /usr/bin/time -f "%U %S %M" -o "$tmp/t" "$@" >/dev/null 2>&1 || true
  awk '{printf "%.3f %.0f", $1+$2, $3/1024}' "$tmp/t"; }
# cpu_mean N CMD...: "CPU_s RSS_MiB", the mean CPU of N runs (one /usr/bin/time over a loop, so the
# kernel's microsecond rusage is summed rather than N figures rounded to time's 10 ms), less the
# same loop running /bin/true; RSS the largest run's.
cpu_mean() { local n=$1; shift
  /usr/bin/time -f "%U %S %M" -o "$tmp/m" bash -c 'n=$1; shift; for ((i = 0; i < n; ++i)); do "$@" >/dev/null 2>&1; done' _ "$n" "$@" || true
  /usr/bin/time -f "%U %S" -o "$tmp/z" bash -c 'n=$1; for ((i = 0; i < n; ++i)); do /bin/true; done' _ "$n" || true
  paste "$tmp/m" "$tmp/z" | awk -v n="$n" '{printf "%.4f %.0f", ($1+$2-$4-$5)/n, $3/1024}'; }
measure() {
  local d=$1 r
  r=$(cpu_rss "$d/simrun" "$g3" --set training.global_batch=1536 -o "$tmp/g3.json"); echo "timeline_sym_cpu_s ${r% *}"
  r=$(cpu_rss "$d/simrun" "$g3" --set training.global_batch=1536); echo "summary_sym_cpu_s ${r% *}"
  r=$(cpu_rss "$d/simrun" "$g3" --set simulation.symmetry=off -q); echo "full_b128_cpu_s ${r% *}"; echo "full_b128_rss_mib ${r#* }"
  r=$(cpu_mean 50 "$d/simrun" "$root/scenarios/gpt2_small_8xa100.json"); echo "start8_cpu_s ${r% *}"; echo "start8_rss_mib ${r#* }"
  "$d/bench_trace_io" --repeat 3 >"$tmp/io" 2>&1 || true
  awk '/^write/{print "write_ev_s", $4} /^read /{print "read_ev_s", $4} /^tracediff/{print "tracediff_wall_s", $4; print "tracediff_cpu_s", $5}' "$tmp/io"
  if [[ -x "$d/bench_block_eval" ]]; then
    "$d/bench_block_eval" --reps 30 --no-op-level "$g3" training.global_batch=1536 >"$tmp/be" 2>&1 || true
    # summary_eval_ms: what a sweep pays per evaluation, lowering included (bench_block_eval's
    # sweep_ms column, the mean of 30 in one process, as a sweep runs them: the first few also pay
    # the first touch of the Programs' memory; binaries without the column: lowering + block path
    # on the whole Program).
    awk '/global_batch=1536/{print "block_lower_ms", $4; print "block_eval_ms", $6
      print "summary_eval_ms", ($7 ~ /^[0-9.]+$/) ? $7 : $4 + $6}' "$tmp/be"
  fi
  "$d/bench_sweep" --variants 1000 --gpt3-variants 8 >"$tmp/sw" 2>&1 || "$d/bench_sweep" >"$tmp/sw" 2>&1 || true
  awk '/global_batch=1536/{print "sweep_gpt3_1536_per_core_s", $(NF-2)} /global_batch=128 /{print "sweep_gpt3_128_per_core_s", $(NF-2)}' "$tmp/sw"
  awk '/^tune/{for(i=1;i<=NF;i++) if($i=="s") print "tune_wall_s", $(i-1)}' "$tmp/sw"
}
measure "$1" >"$tmp/a"
if [[ $# -gt 1 ]]; then measure "$2" >"$tmp/b"; join -a1 -a2 -e - -o 0,1.2,2.2 <(sort "$tmp/a") <(sort "$tmp/b"); else cat "$tmp/a"; fi
