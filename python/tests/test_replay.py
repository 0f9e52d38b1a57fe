"""replay through the module on a synthetic Kineto trace (the base trace of tests/test_replay.cpp)."""

import json

import clustersim as cs


def ev(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def base_trace(path):
    # One step [0, 200] µs; a launch at 10 (5 µs) whose kernel runs [20, 120] on stream 7;
    # cudaDeviceSynchronize [30, 122] returns 2 µs after the kernel; idle Python to 200.
    events = [ev("user_annotation", "ProfilerStep#1", 100, 100, 0, 200),
              ev("cuda_runtime", "cudaLaunchKernel", 100, 100, 10, 5, correlation=1),
              ev("kernel", "elementwise_kernel", 0, 7, 20, 100, device=0, stream=7,
                 correlation=1),
              ev("cuda_runtime", "cudaDeviceSynchronize", 100, 100, 30, 92, correlation=2)]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB"}],
           "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


def test_a_step_replays_exactly_on_its_own_gpu(tmp_path):
    # tests/test_replay.cpp, "a step replays exactly on its own GPU": the kernel runs [20, 120]
    # again, the sync returns at 122, Python runs to 200: the step is 200 µs, as measured.
    out = cs.replay(base_trace(tmp_path / "base.json"))
    steps = out["steps"]
    assert len(steps) == 1
    assert steps["measured_s"].iloc[0] == 200e-6
    assert steps["replayed_s"].iloc[0] == 200e-6
    assert out["mean_step_error"] == 0
    assert out["source_gpu"] == "A100-SXM4-40GB"
    assert out["streams"]["replayed_busy_s"].iloc[0] == 100e-6


def test_a_python_what_if_shortens_the_step(tmp_path):
    # replay.python_scale=0.5 halves the loop thread's Python time: the 10 µs before the launch
    # and the 78 µs after the sync become 5 and 39, so the step is shorter than measured.
    out = cs.replay([base_trace(tmp_path / "base.json")], set={"replay.python_scale": 0.5})
    assert out["steps"]["replayed_s"].iloc[0] < out["steps"]["measured_s"].iloc[0]


def test_a_missing_trace_is_an_input_error(tmp_path):
    try:
        cs.replay(tmp_path / "none.json")
    except cs.InputError as e:
        assert "none.json" in e.file or "none.json" in e.message
    else:
        raise AssertionError("no InputError")
