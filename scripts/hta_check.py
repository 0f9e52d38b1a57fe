#!/usr/bin/python3
"""Runs Holistic Trace Analysis (HTA) on a folder of per-rank traces, as a user of HTA would, and
says for each of its eight analyses whether it gave a usable result.

usage: hta_check.py DIR [--hta HTA_WORK_TREE] [--require LIST] [--ranks all|first|R,R,...]
                        [--cp-ranks first,last|R,R,...] [--json FILE]

DIR             a folder of Kineto-style per-rank traces (`simrun --per-rank DIR`, or a real
                PyTorch-profiler run's)
--hta           a work tree of facebookresearch/HolisticTraceAnalysis (the folder holding hta/);
                default $HTA_DIR. HTA is not part of ClusterSim and is never committed; it needs
                pandas, numpy, plotly, networkx, tqdm and psutil (Debian's python3-* packages).
--require       the analyses that must be ok (default: all eight)
--ranks         the ranks the per-rank analyses (queue, launch, memory_bw) run on: all (default),
                first, or a list
--cp-ranks      the ranks the critical path is computed on: first,last (default) or a list;
                it is the slowest analysis, and a pipeline's first and last stages differ most
--json FILE     also write the results as JSON (scripts/hta-check.sh builds its table from it)

Prints one line per analysis, `NAME ok|n/a|FAIL|empty FIGURES`:
  ok     the analysis returned a result with no NaN or infinite number in it
  n/a    its NaN is the right answer for the run, and the line says why (only: the
         communication overlap of a run with no communication kernel, 0/0)
  FAIL   it raised, reported failure, or its result has a NaN / infinity (named, with where)
  empty  it returned nothing (None, an empty table)
and a `load` line before them: the ranks HTA read, against the files' distributedInfo.world_size
(a folder that holds fewer ranks than the run had is a load FAIL: HTA would silently analyse part
of the run, as `--per-rank` on a symmetric run did before it wrote every rank).

Exit status: 0 every required analysis ok or n/a; 1 the traces do not load or a required analysis is not
ok; 2 usage error, or HTA or its packages cannot be imported (a caller reports a skip).
The analyses and why each needs what it needs: docs/trace-format.md, "Holistic Trace Analysis".
"""
import argparse
import contextlib
import glob
import gzip
import io
import json
import logging
import math
import os
import sys
import time
import warnings

ANALYSES = ["temporal", "overlap", "kernels", "idle", "queue", "launch", "memory_bw",
            "critical_path"]
EXIT_OK, EXIT_NOT_OK, EXIT_USAGE = 0, 1, 2


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="hta_check.py",
        description="Run HTA's eight analyses on a folder of per-rank traces "
                    "(exit 0 ok, 1 not ok, 2 usage or HTA missing).")
    ap.add_argument("dir")
    ap.add_argument("--hta", default=os.environ.get("HTA_DIR", ""),
                    help="HTA work tree (the folder holding hta/); default $HTA_DIR")
    ap.add_argument("--require", default=",".join(ANALYSES),
                    help="comma-separated analyses that must be ok (default: all eight)")
    ap.add_argument("--ranks", default="all",
                    help="ranks for queue, launch and memory_bw: all (default), first, or R,R,...")
    ap.add_argument("--cp-ranks", default="first,last",
                    help="ranks for the critical path: first,last (default) or R,R,...")
    ap.add_argument("--json", default="", help="also write the results to this JSON file")
    return ap.parse_args(argv)


def usage_error(msg):
    print(f"hta_check: {msg}", file=sys.stderr)
    return EXIT_USAGE


# [SECTION] What the folder says about itself (read before HTA, without it)

def trace_files(folder):
    return sorted(glob.glob(os.path.join(folder, "*.json")) +
                  glob.glob(os.path.join(folder, "*.json.gz")))


def describe_file(path):
    """(distributedInfo.world_size or None, ProfilerStep#N annotations, ranks the file stands
    for) of one file, read without HTA. A real trace may lack distributedInfo; `simrun
    --per-rank-representatives` files name their ranks in clustersim.rank_symmetry.stands_for."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None, 0, []
    if not isinstance(doc, dict):
        return None, 0, []
    info = doc.get("distributedInfo")
    ws = info.get("world_size") if isinstance(info, dict) else None
    steps = {e.get("name") for e in doc.get("traceEvents", [])
             if isinstance(e, dict) and str(e.get("name", "")).startswith("ProfilerStep#")}
    sym = (doc.get("clustersim") or {}).get("rank_symmetry") or {}
    stands = sym.get("stands_for") if isinstance(sym, dict) else None
    return (ws if isinstance(ws, int) and ws > 0 else None, len(steps),
            stands if isinstance(stands, list) else [])


# [SECTION] Judging a result

def non_finite(obj, where=""):
    """The first NaN or infinite number in a result (DataFrame, Series, dict, tuple, scalar), as
    'where: column' text, or None. Every number HTA returns is checked, not only the headline."""
    import numpy as np
    import pandas as pd
    if obj is None:
        return None
    if isinstance(obj, pd.DataFrame):
        num = obj.select_dtypes("number")
        if num.empty:
            return None
        bad = ~np.isfinite(num.to_numpy(dtype=float))
        if bad.any():
            r, c = [int(x[0]) for x in np.nonzero(bad)]
            col = num.columns[c]
            col = "/".join(str(x) for x in col) if isinstance(col, tuple) else str(col)
            row = num.index[r]
            row = "/".join(str(x) for x in row) if isinstance(row, tuple) else str(row)
            return f"{where}column {col}, row {row} ({int(bad.sum())} cells)"
        return None
    if isinstance(obj, pd.Series):
        return non_finite(obj.to_frame(), where)
    if isinstance(obj, dict):
        for k, v in obj.items():
            bad = non_finite(v, f"{where}[{k}] ")
            if bad:
                return bad
        return None
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            bad = non_finite(v, f"{where}#{i} ")
            if bad:
                return bad
        return None
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return None if math.isfinite(obj) else f"{where}value {obj}"
    return None


def is_empty(obj):
    if obj is None:
        return True
    if hasattr(obj, "empty"):
        return bool(obj.empty)
    if isinstance(obj, dict):
        return len(obj) == 0 or all(is_empty(v) for v in obj.values())
    return False


def pct(values):
    vals = [float(v) for v in values]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return f"{lo:.1f}" if abs(hi - lo) < 0.05 else f"{lo:.1f}..{hi:.1f}"


# [SECTION] The eight analyses, each returning (result, figures text)

class Checker:
    def __init__(self, ta, ranks, cp_ranks):
        self.ta, self.ranks, self.cp_ranks = ta, ranks, cp_ranks
        # analysis -> why its NaN is the right answer for this run (status n/a, not FAIL)
        self.undefined = {}

    def temporal(self):
        df = self.ta.get_temporal_breakdown(visualize=False)
        cols = [c for c in df.columns if c.endswith("_pctg")]
        return df, ", ".join(f"{c[:-5]} {pct(df[c])} %" for c in cols)

    def overlap(self):
        df = self.ta.get_comm_comp_overlap(visualize=False)
        col = [c for c in df.columns if "overlap" in c.lower()][0]
        # HTA's share is overlapped time / communication kernel time: 0/0 (NaN) for a run with no
        # communication kernel, such as model parallelism whose activations cross GPUs as peer
        # copies (kernel type MEMORY). Undefined there, as on a real trace of such a run.
        by_type, _ = self.ta.get_gpu_kernel_breakdown(visualize=False)
        if df[col].isna().any() and "COMMUNICATION" not in set(by_type["kernel_type"]):
            self.undefined["overlap"] = ("no communication kernel in the run: HTA's overlap share "
                                         "is 0/0 (NaN)")
        return df, f"comm overlapped {pct(df[col])} %"

    def kernels(self):
        by_type, by_kernel = self.ta.get_gpu_kernel_breakdown(visualize=False)
        shares = ", ".join(f"{t} {p:.1f} %" for t, p in
                           zip(by_type["kernel_type"], by_type["percentage"]))
        return (by_type, by_kernel), f"{shares}; {by_kernel.shape[0]} kernel rows"

    def idle(self):
        out = self.ta.get_idle_time_breakdown(visualize=False)
        df = out[0] if isinstance(out, tuple) else out
        col = "idle_time_ratio" if "idle_time_ratio" in df.columns else None
        fig = f"{df.shape[0]} rows"
        if col:
            fig += f", idle ratio {pct(df[col] * 100)} %"
        return out, fig

    def queue(self):
        df = self.ta.get_queue_length_summary(ranks=self.ranks)
        return df, "" if df is None else f"{df.shape[0]} streams over {len(self.ranks)} ranks"

    def launch(self):
        d = self.ta.get_cuda_kernel_launch_stats(ranks=self.ranks, visualize=False)
        n = sum(v.shape[0] for v in d.values()) if d else 0
        return d, f"{n} launches over {len(d)} ranks"

    def memory_bw(self):
        df = self.ta.get_memory_bw_summary(ranks=self.ranks)
        if df is None:
            return None, ""
        kinds = {}
        for (rank, kind), row in df.iterrows():
            kinds.setdefault(kind, []).append(int(row[("memory_bw_gbps", "count")]))
        fig = ", ".join(f"{k} {min(v)}" + (f"..{max(v)}" if max(v) != min(v) else "")
                        + " samples/rank" for k, v in sorted(kinds.items()))
        return df, fig

    def critical_path(self):
        results, figs = {}, []
        for r in self.cp_ranks:
            step = analysed_step(self.ta, r)
            graph, ok = self.ta.critical_path_analysis(rank=r, annotation=step, instance_id=0)
            if not ok:
                raise RuntimeError(f"rank {r} {step}: critical_path_analysis reported failure")
            s = graph.summary()
            results[r] = s
            top = s.sort_values(ascending=False).head(2)
            figs.append(f"rank {r} {step}: " +
                        ", ".join(f"{k} {v:.1f} %" for k, v in top.items()))
        return results, "; ".join(figs)


def profiler_steps(ta, rank):
    """ProfilerStep#N names on a rank, by N."""
    df = ta.t.get_trace(rank)
    sym = ta.t.symbol_table.get_sym_table()
    names = {sym[i] for i in df["name"].unique() if sym[i].startswith("ProfilerStep#")}
    return sorted(names, key=lambda s: int(s.split("#")[1]) if s.split("#")[1].isdigit() else 0)


def analysed_step(ta, rank):
    """The step the critical path is computed on: HTA's advice is to avoid the first one
    (critical_path_analysis, note 1), and its trace has already left out the last one
    (include_last_profiler_step=False): the second of the steps HTA kept, else the first."""
    steps = profiler_steps(ta, rank)
    if not steps:
        raise ValueError(f"no ProfilerStep# annotation on rank {rank}")
    return steps[1] if len(steps) >= 2 else steps[0]


def pick_ranks(spec, loaded):
    if spec == "all":
        return loaded
    out = []
    for part in spec.split(","):
        if part == "first":
            out.append(loaded[0])
        elif part == "last":
            out.append(loaded[-1])
        elif part.isdigit() and int(part) in loaded:
            out.append(int(part))
        else:
            raise ValueError(f"rank {part!r} is not among the loaded ranks {loaded[0]}..{loaded[-1]}")
    return sorted(set(out))


# [SECTION] Main

def main(argv):
    a = parse_args(argv)
    required = [r for r in a.require.split(",") if r]
    unknown = [r for r in required if r not in ANALYSES]
    if unknown:
        return usage_error(f"--require: unknown analysis {','.join(unknown)} "
                           f"(known: {','.join(ANALYSES)})")
    if not os.path.isdir(a.dir):
        return usage_error(f"{a.dir}: not a directory (hint: simrun SCENARIO --per-rank DIR)")
    files = trace_files(a.dir)
    if not files:
        return usage_error(f"{a.dir}: no *.json or *.json.gz trace in it")
    if not a.hta or not os.path.isdir(os.path.join(a.hta, "hta")):
        return usage_error("no HTA work tree (hint: --hta DIR or HTA_DIR=DIR, DIR holding hta/)")
    warnings.filterwarnings("ignore")
    sys.path.insert(0, os.path.abspath(a.hta))
    try:
        import numpy  # noqa: F401
        import pandas  # noqa: F401
        from hta.trace_analysis import TraceAnalysis
    except Exception as e:
        return usage_error(f"cannot import HTA or its packages from {a.hta}: "
                           f"{type(e).__name__}: {e}")
    logging.disable(logging.CRITICAL)  # HTA logs at INFO on its own handlers

    report = {"dir": a.dir, "files": len(files), "analyses": {}, "required": required}
    world, steps, stands = describe_file(files[0])
    if steps < 2:
        # HTA keeps only the kernels launched before the last ProfilerStep starts: with one step
        # (or none) every analysis would be empty. Said before spending HTA's load time on it.
        fig = (f"{len(files)} files with {steps} ProfilerStep{'s' if steps != 1 else ''} each: "
               "HTA leaves out a trace's last step, so nothing is left to analyse (hint: "
               "simulate 3 steps, --set training.steps=3)")
        print(f"load FAIL {fig}")
        report["load"] = {"status": "FAIL", "world_size": world, "steps": steps, "figures": fig}
        write_json(a.json, report)
        return EXIT_NOT_OK
    sink = io.StringIO()  # HTA prints progress and summaries: kept out of our lines
    t0 = time.monotonic()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            ta = TraceAnalysis(trace_dir=a.dir)
    except Exception as e:
        print(f"load FAIL {type(e).__name__}: {str(e)[:200]}")
        report["load"] = {"status": "FAIL", "error": f"{type(e).__name__}: {e}"}
        write_json(a.json, report)
        return EXIT_NOT_OK
    load_s = time.monotonic() - t0
    loaded = sorted(ta.t.get_ranks())
    stood_for = sorted({r for f in files for r in describe_file(f)[2]}) if stands else []
    # A folder of representatives (simrun --per-rank-representatives) stands for every rank when
    # the ranks its files name cover the world: HTA then analyses each simulated GPU once.
    representatives = bool(stood_for) and world is not None and stood_for == list(range(world))
    load_ok = bool(loaded) and (world is None or len(loaded) == world or representatives)
    load_fig = (f"{len(loaded)} ranks" + (f" of world_size {world}" if world else "") +
                f" from {len(files)} files in {load_s:.1f} s; {steps} ProfilerSteps per file,"
                f" HTA analyses {max(steps - 1, 0)} (it leaves out the last)")
    if representatives:
        load_fig += (f"; the files are the simulated GPUs' only, standing for all {world} ranks "
                     "(clustersim.rank_symmetry.stands_for)")
    elif world is not None and len(loaded) != world:
        load_fig += "; the folder holds fewer ranks than the run had"
    print(f"load {'ok' if load_ok else 'FAIL'} {load_fig}")
    report["load"] = {"status": "ok" if load_ok else "FAIL", "ranks": len(loaded),
                      "world_size": world, "representatives": representatives, "steps": steps,
                      "seconds": round(load_s, 1), "figures": load_fig}
    if not loaded:
        write_json(a.json, report)
        return EXIT_NOT_OK
    try:
        checker = Checker(ta, pick_ranks(a.ranks, loaded), pick_ranks(a.cp_ranks, loaded))
    except ValueError as e:
        return usage_error(f"--ranks/--cp-ranks: {e}")

    not_ok = [] if load_ok else ["load"]
    for name in ANALYSES:
        t1 = time.monotonic()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                result, fig = getattr(checker, name)()
            bad = non_finite(result)
            if is_empty(result):
                status, fig = "empty", "returned nothing"
            elif bad and name in checker.undefined:
                status, fig = "n/a", f"{checker.undefined[name]}; {fig}"
            elif bad:
                status, fig = "FAIL", f"NaN or infinity in the result: {bad}; {fig}"
            else:
                status = "ok"
        except Exception as e:
            status, fig = "FAIL", f"{type(e).__name__}: {str(e)[:200]}"
        secs = time.monotonic() - t1
        print(f"{name} {status} {fig}")
        report["analyses"][name] = {"status": status, "figures": fig, "seconds": round(secs, 1)}
        if name in required and status not in ("ok", "n/a"):
            not_ok.append(name)
    write_json(a.json, report)
    if not_ok:
        print(f"hta_check: not ok: {','.join(not_ok)}")
        return EXIT_NOT_OK
    na = [n for n in required if report["analyses"][n]["status"] == "n/a"]
    print(f"hta_check: {len(required) - len(na)} required analyses ok on {len(loaded)} ranks" +
          (f", {len(na)} n/a ({','.join(na)}: undefined for this run)" if na else ""))
    return EXIT_OK


def write_json(path, report):
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
