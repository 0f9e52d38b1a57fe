#!/usr/bin/env bash
# Runs Holistic Trace Analysis (HTA), as a user would, on `simrun --per-rank` output of every
# bundled scenario on more than one GPU, at its bundled step count, plus DDP (a --set variant) and a
# stand-in real run (processes), and checks HTA's eight analyses with scripts/hta_check.py
# (docs/trace-format.md, "Holistic Trace Analysis"). HTA is not part of ClusterSim and is never
# committed: pass a work tree of it (the folder holding hta/) and have Debian's python3-pandas,
# -numpy, -plotly, -networkx, -tqdm and -psutil installed.
#
# usage: scripts/hta-check.sh HTA_WORK_TREE [--build DIR] [--out DIR] [--table FILE] [--keep]
#                             [--resume] [SCENARIO.json ...]
#   --build DIR   simrun's build (default build/release)
#   --out DIR     where the per-rank folders and results go (default a new temporary folder)
#   --table FILE  also write the results as a Markdown table (docs/measured/hta-check.md)
#   --resume      with --out: skip the runs whose results are already in DIR (an interrupted check
#                 goes on where it stopped; the table covers every result in DIR)
#   --keep        keep the per-rank folders (by default each is removed once checked: the large
#                 runs write gigabytes)
#   SCENARIO...   check only these (default: scenarios/*.json, single-GPU runs left out, fewest
#                 GPUs first: HTA loads 4 GB of per-rank JSON in about 10 minutes on 2 cores)
#
# Each run is written as `simrun SCENARIO --per-rank DIR` writes it by default (every rank). When
# simrun refuses that (more than limits.max_per_rank_events, docs/limits.md), it follows the
# refusal's hint, --per-rank-representatives: the simulated GPUs' files, each standing for its
# mirrors, the documented reduction of the table. The 1,024+-GPU scenarios keep one step
# (docs/scenario.md): they get a second row with --set training.steps=3.
# Exit status: 0 every analysis ok on every run at its bundled step count but the one-step ones,
# 1 otherwise, 2 usage error or HTA missing.
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/hta-check.sh HTA_WORK_TREE [--build DIR] [--out DIR] [--table FILE] [--keep] [--resume] [SCENARIO.json ...]"
[[ $# -ge 1 && $1 != -* ]] || { echo "$usage" >&2; exit 2; }
hta=$1
shift
build=build/release out="" table="" keep=0 resume=0 scenarios=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=${2:?$usage}; shift 2 ;;
    --out) out=${2:?$usage}; shift 2 ;;
    --table) table=${2:?$usage}; shift 2 ;;
    --keep) keep=1; shift ;;
    --resume) resume=1; shift ;;
    -*) echo "hta-check: unknown option $1" >&2; echo "$usage" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
[[ -d $hta/hta ]] || { echo "hta-check: $hta: no hta/ folder in it (give a work tree of HolisticTraceAnalysis)" >&2; exit 2; }
simrun=$build/tools/simrun
[[ -x $simrun ]] || { echo "hta-check: $simrun: not built (cmake --build --preset release --target simrun)" >&2; exit 2; }
[[ -n $out ]] || out=$(mktemp -d -t csim_hta_XXXXXX)
mkdir -p "$out" || exit 2
given=${#scenarios[@]}
# Fewest GPUs first, so that the quick results come first (then by name).
[[ $given -gt 0 ]] || mapfile -t scenarios < <(/usr/bin/python3 -c '
import glob, json
def gpus(p):
    c = json.load(open(p)).get("cluster", {})
    return c.get("nodes", 1) * c.get("gpus_per_node", 1) if isinstance(c, dict) else 0
for p in sorted(glob.glob("scenarios/*.json"), key=lambda p: (gpus(p), p)): print(p)')
check=scripts/hta_check.py
failed=0

# run NAME STEP_NOTE SIMRUN_ARGS...: writes NAME's per-rank folder, runs hta_check.py on it, and
# records how the folder was written in $out/NAME.how.
run() {
  local name=$1 note=$2 dir=$out/$1 how="every rank"
  shift 2
  if [[ $resume -eq 1 && -f $out/$name.how && -f $out/$name.json ]]; then
    echo "=== $name: done in an earlier run ($out/$name.how)"
    return
  fi
  rm -rf "${dir:?}" "$out/$name.json" "$out/$name.how"
  echo "=== $name: simrun $* --per-rank $dir"
  if ! "$simrun" "$@" -q --per-rank "$dir" 2>"$out/$name.err"; then
    if grep -q "limits.max_per_rank_events" "$out/$name.err"; then
      how="representatives"
      echo "    every rank refused ($(grep -o 'would write about [0-9]* events' "$out/$name.err")): --per-rank-representatives"
      rm -rf "${dir:?}"
      "$simrun" "$@" -q --per-rank "$dir" --per-rank-representatives 2>"$out/$name.err" || {
        cat "$out/$name.err"; echo "$how|$note|simrun failed" >"$out/$name.how"; failed=1; return; }
    else
      cat "$out/$name.err"; echo "$how|$note|simrun failed" >"$out/$name.how"; failed=1; return
    fi
  fi
  local files
  files=$(find "$dir" -name 'rank-*.json' | wc -l)
  if [[ $files -le 1 ]] && ! grep -q stands_for "$dir/rank-0.json" 2>/dev/null; then
    echo "    one GPU: not a multi-GPU run, left out"
    rm -rf "${dir:?}"
    return
  fi
  echo "$how|$note|$(du -sh "$dir" | cut -f1)" >"$out/$name.how"
  /usr/bin/python3 "$check" "$dir" --hta "$hta" --json "$out/$name.json"
  local rc=$?
  [[ $rc -eq 2 ]] && { echo "hta-check: HTA cannot run (above)" >&2; exit 2; }
  [[ $rc -ne 0 && $note != one-step* ]] && failed=1
  [[ $keep -eq 1 ]] || rm -rf "${dir:?}"
}

# First, beyond the bundled files: DDP on the DataParallel scenario, and the real executor (stand-in GPUs,
# one process per rank), whose per-rank files come from a real run's trace; with the default list.
if [[ $given -eq 0 ]]; then
  run "dp_vs_ddp_4x1080ti@ddp" "--set strategy.kind=ddp" scenarios/dp_vs_ddp_4x1080ti.json --set strategy.kind=ddp
  run "linear_5x2_dp2@standin" "real run: --backend standin --launch processes, DDP" \
    scenarios/linear_5x2_dp2.json --set strategy.kind=ddp --backend standin --launch processes
fi

for s in "${scenarios[@]}"; do
  name=$(basename "$s" .json)
  steps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("training", {}).get("steps", 3))' "$s" 2>/dev/null || echo 3)
  if [[ $steps -lt 3 ]]; then
    run "$name" "one-step (bundled: $steps)" "$s"
    run "$name@3steps" "--set training.steps=3" "$s" --set training.steps=3
  else
    run "$name" "" "$s"
  fi
done
# The table, from hta_check.py's JSON results.
/usr/bin/python3 - "$out" "$hta" "${table:-}" <<'EOF'
import datetime, glob, json, os, sys
out, hta, table = sys.argv[1], sys.argv[2], sys.argv[3]
names = ["temporal", "overlap", "kernels", "idle", "queue", "launch", "memory_bw", "critical_path"]
try:
    ver = {}
    exec(open(os.path.join(hta, "hta", "version.py")).read(), ver)
    version = ver.get("__version__", "?")
except OSError:
    version = "?"
rows = []
for how_file in sorted(glob.glob(os.path.join(out, "*.how"))):
    name = os.path.basename(how_file)[:-4]
    how, note, size = open(how_file).read().strip().split("|")
    res = {}
    jf = os.path.join(out, name + ".json")
    if os.path.exists(jf):
        res = json.load(open(jf))
    load = res.get("load", {})
    ws = load.get("world_size") or "?"
    ranks = load.get("ranks", "-")
    files = res.get("files", "-")
    status = [res.get("analyses", {}).get(n, {}).get("status", "-") for n in names]
    secs = load.get("seconds", "-")
    mode = how + (f" ({files} files for {ws} ranks)" if how == "representatives" else "")
    if note:
        mode += f"; {note}"
    rows.append([name, str(ws), mode, size, str(load.get("steps", "-")), load.get("status", "FAIL" if how else "-"),
                 *status, str(secs)])
head = ["run", "GPUs", "per-rank files", "size", "steps", "load", *names, "HTA load s"]
lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
lines += ["| " + " | ".join(r) + " |" for r in rows]
text = "\n".join(lines) + "\n"
print(text)
if table:
    os.makedirs(os.path.dirname(table) or ".", exist_ok=True)
    with open(table, "w") as f:
        f.write("# HTA's eight analyses on the bundled multi-GPU scenarios\n\n")
        f.write("Generated by `scripts/hta-check.sh HTA_WORK_TREE --table " + table + "` on "
                + datetime.date.today().isoformat() + " with HTA " + version
                + " (docs/trace-format.md, \"Holistic Trace Analysis\"); do not edit by hand.\n"
                "ok: a result without NaN or infinity; n/a: a NaN that is the right answer "
                "(the overlap of a run without communication kernels, 0/0); FAIL: an error, "
                "another NaN or an infinity; empty: no result; -: not run. `steps`: ProfilerSteps per file (HTA analyses all "
                "but the last). `HTA load s`: TraceAnalysis's load on this 2-core machine.\n\n")
        f.write(text)
EOF
echo "hta-check: outputs in $out"
exit $failed
