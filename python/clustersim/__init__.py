"""ClusterSim from Python (docs/python.md): the run library, not the command lines.

    import clustersim as cs
    sc = cs.load("scenarios/dp_vs_ddp_4x1080ti.json", set={"strategy.kind": "ddp"})
    r = cs.simulate(sc)
    r.step_time_s, r.samples_per_s, r.mfu, r.oom, r.imbalance
    cs.sweep(sc, grid={"training.global_batch": [64, 128, 256]}, jobs=2)

Long calls release the GIL; Ctrl-C stops them and returns what finished, marked incomplete.
Bad input raises InputError (.file, .json_path, .message, .hint), a backend that cannot run
here BackendUnavailable.
"""

import json as _json
import os as _os

from . import _clustersim
from ._clustersim import BackendUnavailable, Error, InputError, Scenario, cuda_status
# Diagnostics of where the module looks for csim-rank and the loadable modules (docs/python.md,
# "Where the module looks"): the folder dladdr found the module in, and the csim-rank found.
from ._clustersim import _module_search_dir, _rank_executable
from ._results import Result, table

__all__ = ["load", "simulate", "sweep", "tune", "collective", "diff", "replay", "Scenario", "Result",
           "InputError", "BackendUnavailable", "Error", "cuda_status"]


def _value_text(value):
    """A --set VALUE: strings as they are, anything else as JSON (True -> true, [1, 2])."""
    return value if isinstance(value, str) else _json.dumps(value)


def _sets(overrides):
    if overrides is None:
        return []
    if not isinstance(overrides, dict):
        raise TypeError("set= takes a dict {'dotted.key': value}")
    return [f"{k}={_value_text(v)}" for k, v in overrides.items()]


def load(scenario, set=None, hf_config=None, device_profile=None, name=None):
    """A scenario from a file path or a dict (the scenario format, docs/scenario.md).

    set: {"strategy.kind": "ddp", ...}, applied as simrun --set is, in order;
    hf_config: a Hugging Face config.json replacing the model (file scenarios only);
    device_profile: a profile written by simrun calibrate.
    """
    sets = _sets(set)
    if isinstance(scenario, Scenario):  # its overrides first, then these
        sets = list(scenario.overrides) + sets
        name = name or scenario.name
        scenario = scenario.document
    if isinstance(scenario, dict):
        return _clustersim._load(None, scenario, name or "<dict>", sets, hf_config or "",
                                 device_profile or "")
    path = _os.fspath(scenario)
    return _clustersim._load(path, None, name or path, sets, _os.fspath(hf_config or ""),
                             _os.fspath(device_profile or ""))


def _scenario(sc):
    return sc if isinstance(sc, Scenario) else load(sc)


def simulate(scenario, backend="sim", launch="threads", trace=None, per_rank=None):
    """One run, as simrun runs it; no trace is built unless asked for.

    backend: "sim", "standin" (the real executor on CPU threads) or "cuda"; launch (real
    backends): "threads" (one process) or "processes" (one rank process per Program process,
    each started by exec of csim-rank, never a fork of this interpreter).
    trace: write the Chrome trace here; per_rank: a folder for one trace per GPU.
    Returns a Result: every summary figure as an attribute, with its unit in its name.
    """
    sc = _scenario(scenario)
    run = _clustersim._simulate(sc, backend, launch, bool(per_rank))
    result = Result(run)
    if trace:
        result.write_trace(trace)
    if per_rank:
        result.write_per_rank(per_rank)
    return result


def sweep(scenario, grid, jobs=1, op_level=False, sort="throughput", random=0, seed=0,
          max_variants=100000, output=None, fresh=False, on_row=None):
    """Every variant of `grid` ({"dotted.key": [v1, v2], ...}, the first key slowest), as
    simrun sweep runs them: a pandas DataFrame (a list of dicts without pandas), fitting
    variants first, best first by `sort`. `.attrs["complete"]` (DataFrame) or `.complete`
    (list) is False when Ctrl-C stopped it.

    output: simrun sweep's results file (.csv, .jsonl, .json), checkpointed while it runs and
    resumed as simrun sweep -o resumes it: when it holds an earlier, interrupted run of the same
    sweep, its rows are kept and their variants skipped (fresh=True starts over); the rows
    returned are then all of the file's. on_row(row): called with each new row (a dict) as it
    finishes, from a worker thread; returning False stops the sweep as Ctrl-C does."""
    sc = _scenario(scenario)
    pairs = [(k, [_value_text(v) for v in values]) for k, values in grid.items()]
    rows, complete = _clustersim._sweep(sc, pairs, jobs, op_level, sort, random or 0, seed,
                                        max_variants, _os.fspath(output or ""), bool(fresh),
                                        on_row)
    for row in rows:  # knob values back to numbers where they are numbers
        for k, _ in pairs:
            try:
                row[k] = _json.loads(row[k])
            except ValueError:
                pass
    return table(rows, {"complete": complete, "keys": [k for k, _ in pairs]})


def tune(scenario, gpus=0, top=5, jobs=1, op_level=False):
    """simrun tune: the fastest layouts that fit; the report simrun tune -o writes, as a dict
    (its "complete" False when Ctrl-C stopped the search)."""
    return _clustersim._tune(_scenario(scenario), gpus, top, jobs, op_level)


def collective(cluster, op="all_reduce", sizes=("8", "128M"), factor=2.0, gpus=0,
               dtype="float", algo="auto", proto="auto", set=None):
    """simrun collective: one collective on a cluster file, timed for each size from sizes[0]
    to sizes[1] (bytes, or with a K/M/G suffix), times `factor`; rows as nccl-tests prints."""
    lo, hi = (str(s) for s in sizes)
    rows = _clustersim._collective(_os.fspath(cluster), op, lo, hi, factor, gpus, dtype, algo,
                                   proto, _sets(set))
    return table(rows, {})


def diff(base, new, tolerance=0.02, tolerances=None):
    """tracediff: BASE and NEW each a trace (.json, .json.gz) or a simrun --summary file, or a
    list of them (medians per side). Returns tracediff --json's report as a dict, with
    "regressed" True when a metric got worse beyond its tolerance (tracediff's exit 1); "rows"
    as a DataFrame when pandas is importable."""
    def paths(side):
        if isinstance(side, (str, _os.PathLike)):
            side = [side]
        return [_os.fspath(p) for p in side]
    out = _clustersim._diff(paths(base), paths(new), float(tolerance),
                            _os.fspath(tolerances or ""))
    if "rows" in out:
        out["rows"] = table(out["rows"], {})
    return out


def replay(inputs, set=None, trace=None):
    """simrun replay: profiler traces (files or folders) replayed with the what-ifs of `set`.
    Returns {"steps", "streams", "mean_step_error", "source_gpu", "target_gpu", "complete"}."""
    if isinstance(inputs, (str, _os.PathLike)):
        inputs = [inputs]
    out = _clustersim._replay([_os.fspath(i) for i in inputs], _sets(set),
                              _os.fspath(trace or ""))
    out["steps"] = table(out["steps"], {})
    out["streams"] = table(out["streams"], {})
    return out
