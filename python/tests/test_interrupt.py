"""Ctrl-C inside Python: the module's wait checks Python's signals and sets the run library's
cancel flag; the call returns what finished, marked incomplete (no process signal handler)."""

import os
import signal
import threading

import pytest

import clustersim as cs


def interrupted(call):
    """call() with one SIGINT sent 50 ms after it began, from another thread, as Ctrl-C would be.
    A signal that lands in Python code before the module's wait began raises KeyboardInterrupt
    there: call again. The calls below take seconds, far longer than the 50 ms."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for _ in range(20):
            timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            try:
                result = call()
            except KeyboardInterrupt:
                timer.join()
                continue
            timer.cancel()
            timer.join()
            return result
        pytest.fail("every call was interrupted before it started")
    finally:
        signal.signal(signal.SIGINT, old)


def test_ctrl_c_stops_a_sweep_and_keeps_what_finished(scenario):
    # 100 batches x 40 step counts = 4000 variants: many seconds of simulation, stopped within
    # the 50 ms of the module's signal check after the SIGINT.
    grid = {"training.global_batch": list(range(4, 404, 4)),
            "training.steps": list(range(2, 42))}
    df = interrupted(lambda: cs.sweep(scenario("dp_vs_ddp_4x1080ti.json"), grid=grid, jobs=2))
    assert df.attrs["complete"] is False
    assert len(df) < 4000
    assert set(df["status"]) <= {"ok", "oom"}  # the rows kept are whole variants


def test_ctrl_c_stops_a_simulation_marked_incomplete(scenario):
    # Llama 3 70B on 512 H100s (3D, rank symmetry) for 48 steps: 1.3 M ops, about a second of
    # simulation on a fast machine, far longer than the 50 ms signal-check period.
    sc = cs.load(scenario("llama3_70b_512xh100_3d.json"), set={"training.steps": 48})
    r = interrupted(lambda: cs.simulate(sc))
    assert r.interrupted
    assert not r.complete
    assert r.to_dict()["complete"] is False
    assert r.completed_steps < 48
