"""launch="processes" from Python: one rank process per Program process, each started by exec of
csim-rank (never a fork of the interpreter), coordinated by the module's thread; on the CPU
stand-in device, so it runs here without a GPU (docs/python.md, "Real runs")."""

import json
import os
import threading

import pytest

import clustersim as cs

DDP = {"strategy.kind": "ddp"}


def events_by_gpu(path):
    """(pid, name) -> count of the trace's complete events, timestamps left out: a real run's
    times are measured, its ops are the Program's."""
    with open(path) as f:
        trace = json.load(f)
    counts = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            key = (e["pid"], e["name"])
            counts[key] = counts.get(key, 0) + 1
    return counts, trace


def test_processes_gives_the_threads_runs_ops_and_memory(tmp_path, scenario):
    # DDP on 2 GPUs (linear_5x2_dp2: 2 processes, one per rank). Both launch modes run the same
    # Program on the stand-in device: the same ops under the same names on the same GPUs, and the
    # same allocations in stream order, so the same peak per GPU; the times are measured (the
    # stand-in's sleeps), so they are not compared.
    sc = cs.load(scenario("linear_5x2_dp2.json"), set=DDP)
    threads = cs.simulate(sc, backend="standin", launch="threads", trace=tmp_path / "t.json")
    procs = cs.simulate(sc, backend="standin", launch="processes", trace=tmp_path / "p.json")
    assert threads.complete and procs.complete
    assert procs.failure == ""
    assert procs.completed_steps == threads.completed_steps == sc.document["training"]["steps"]
    t_events, _ = events_by_gpu(tmp_path / "t.json")
    p_events, p_trace = events_by_gpu(tmp_path / "p.json")
    assert p_events == t_events
    peak = lambda r: [g["peak_bytes"] for g in r.to_dict()["per_gpu"]]
    assert peak(procs) == peak(threads)
    # The trace says how it ran: 2 ranks, each with its measured clock offset.
    md = p_trace["clustersim"]  # the trace's metadata (docs/trace-format.md)
    assert md["launch"] == "processes" and md["ranks"] == 2
    assert sorted(c["rank"] for c in md["clock_sync"]) == [0, 1]  # in the order they connected


def test_processes_from_four_threads_at_once(scenario):
    # The module's launcher is thread-safe: four interpreter threads each start a processes run
    # (8 rank processes in all), and each gets its own complete result.
    sc = cs.load(scenario("linear_5x2_dp2.json"), set=DDP)
    results = [None] * 4

    def one(i):
        results[i] = cs.simulate(sc, backend="standin", launch="processes")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is not None and r.complete for r in results)
    peaks = {tuple(g["peak_bytes"] for g in r.to_dict()["per_gpu"]) for r in results}
    assert len(peaks) == 1


def test_a_missing_rank_executable_is_one_input_error(monkeypatch, scenario):
    monkeypatch.setenv("CSIM_RANK_EXE", "/nonexistent/csim-rank")
    with pytest.raises(cs.InputError) as e:
        cs.simulate(scenario("linear_5x2_dp2.json"), backend="standin", launch="processes")
    assert e.value.json_path == "launch"
    assert "/nonexistent/csim-rank" in str(e.value)
    assert "\n" not in str(e.value)


def test_mpi_is_refused_inside_python(scenario):
    with pytest.raises(cs.InputError) as e:
        cs.simulate(scenario("linear_5x2_dp2.json"), backend="standin", launch="mpi")
    assert e.value.json_path == "launch" and "mpirun" in str(e.value)
