#!/usr/bin/env bash
# Fuzzes the input parsers for a bounded time (docs/fuzzing.md).
#
# usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  libFuzzer's -max_total_time for each target (default 40)
#   TARGET              fuzz_scenario, fuzz_trace_reader, fuzz_tolerances, fuzz_replay_importer
#                       (default: all four)
#
# Configures and builds the "fuzz" preset (clang, libFuzzer, ASan + UBSan), builds the seed corpora
# from the bundled files (fuzz/make_seeds.py) and runs each target in turn. The corpus a run grows
# is kept in build/fuzz/corpus/TARGET and reused by the next run. Prints the executions per target.
# When a target fails (crash, sanitizer report, escaped exception, timeout, out of memory, leak),
# its failing input is copied to tests/fuzz_regressions/TARGET/, which the regular test suite
# replays from then on, and the script exits with 1 after running the remaining targets.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-40}
if [ $# -gt 0 ]; then shift; fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(fuzz_scenario fuzz_trace_reader fuzz_tolerances fuzz_replay_importer); fi
max_len=${CSIM_FUZZ_MAX_LEN:-65536}

build=build/fuzz
jobs=$(nproc 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$jobs}
t0=$(date +%s)
echo "=== fuzz: configure + build (preset fuzz)"
cmake --preset fuzz >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 2; }
cmake --build --preset fuzz
t1=$(date +%s)
python3 fuzz/make_seeds.py "$build/seeds" "$max_len"

failed=()
summary=()
for t in "${targets[@]}"; do
  dict=fuzz/json.dict
  if [ "$t" = fuzz_tolerances ]; then dict=fuzz/tolerances.dict; fi
  corpus=$build/corpus/$t
  artifacts=$build/artifacts/$t
  log=$build/$t.log
  mkdir -p "$corpus" "$artifacts"
  rm -f "$artifacts"/*
  echo "=== fuzz: $t for ${secs}s (log: $log)"
  rc=0
  start=$(date +%s)
  # ASan's leak check is on by default under libFuzzer: a leak fails the run too.
  "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -print_final_stats=1 -dict="$dict" -artifact_prefix="$artifacts/" \
    "$corpus" "$build/seeds/$t" >"$log" 2>&1 || rc=$?
  took=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  line="$t: ${runs:-?} executions in ${took}s (${rate:-?} exec/s), corpus $units inputs"
  saved=()
  for a in "$artifacts"/*; do
    [ -f "$a" ] || continue
    case "$(basename "$a")" in slow-unit-*) continue ;; esac
    mkdir -p "tests/fuzz_regressions/$t"
    cp "$a" "tests/fuzz_regressions/$t/"
    saved+=("tests/fuzz_regressions/$t/$(basename "$a")")
    # In CI the working tree is thrown away: the log then carries the input (base64 -d restores it).
    if [ "$(wc -c <"$a")" -le 16384 ]; then
      echo "fuzz: $t: $(basename "$a") (base64): $(base64 -w 0 "$a")"
    fi
  done
  if [ $rc -ne 0 ] || [ ${#saved[@]} -gt 0 ]; then
    grep -E "ERROR|BUG|SUMMARY|runtime error|deadly signal|timeout|out-of-memory" "$log" | head -20 || true
    line="$line: FAILED (exit $rc); input(s) saved: ${saved[*]:-none}"
    failed+=("$t")
  fi
  echo "$line"
  summary+=("$line")
done

echo "=== fuzz: summary (build $((t1 - t0))s, total $(($(date +%s) - t0))s)"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}: fix the bug, keep the saved input (tests/fuzz_regressions/)," \
       "and check it with ctest -R fuzz_regressions" >&2
  exit 1
fi
