"""load and simulate: the same run as simrun, its summary as attributes and as --summary JSON."""

import json
import threading

import pytest

import clustersim as cs


def golden(root, name):
    with open(root / "traces" / name) as f:
        return json.load(f)


def test_to_dict_is_the_golden_summary_simrun_writes(root, scenario):
    # traces/goldens.txt: dp_vs_ddp_4x1080ti_ddp.summary.json is simrun --summary of the scenario
    # with --set strategy.kind=ddp; the module's run must give the same JSON, key for key.
    r = cs.simulate(cs.load(scenario("dp_vs_ddp_4x1080ti.json"), set={"strategy.kind": "ddp"}))
    assert r.to_dict() == golden(root, "dp_vs_ddp_4x1080ti_ddp.summary.json")
    r = cs.simulate(cs.load(scenario("dp_vs_ddp_4x1080ti.json")))
    assert r.to_dict() == golden(root, "dp_vs_ddp_4x1080ti.summary.json")


def test_summary_figures_are_attributes(root, scenario):
    r = cs.simulate(scenario("dp_vs_ddp_4x1080ti.json"))
    g = golden(root, "dp_vs_ddp_4x1080ti.summary.json")
    assert r.step_time_s == g["step_time_s"]
    assert r.samples_per_s == g["samples_per_s"]
    assert r.imbalance == g["imbalance"]
    assert r.mfu == g["mfu"]
    assert r.oom == (g["oom"] is not None)
    assert r.complete
    per_gpu = r.per_gpu
    # One row per GPU of the 4-GPU server, each with its peak bytes.
    assert len(per_gpu) == 4
    rows = per_gpu.to_dict("records") if hasattr(per_gpu, "to_dict") else list(per_gpu)
    assert [row["peak_bytes"] for row in rows] == [gp["peak_bytes"] for gp in g["per_gpu"]]
    with pytest.raises(AttributeError):
        r.no_such_figure


def test_a_dict_scenario_runs_as_its_file(scenario):
    with open(scenario("dp_vs_ddp_4x1080ti.json")) as f:
        doc = json.load(f)
    from_file = cs.simulate(cs.load(scenario("dp_vs_ddp_4x1080ti.json")))
    from_dict = cs.simulate(cs.load(doc))
    # The same document, so the same run; only the name standing for the file differs.
    a, b = from_dict.to_dict(), from_file.to_dict()
    a.pop("scenario"), b.pop("scenario")
    assert a == b


def test_hf_config_replaces_the_model(root, scenario):
    # The bundled GPT-2 config (124M parameters: 12 blocks of 12 d^2 with d = 768, plus the
    # 50257 x 768 embedding) replaces the tiny transformer's model: the summary's parameter
    # count goes from the tiny one's (well under 100M) to GPT-2's (over 100M).
    cfg = root / "scenarios" / "models" / "gpt2.json"
    tiny = cs.simulate(cs.load(scenario("transformer_tiny_1xh200.json")))
    r = cs.simulate(cs.load(scenario("transformer_tiny_1xh200.json"), hf_config=cfg))
    assert tiny.to_dict()["transformer"]["params"] < 100_000_000
    assert r.to_dict()["transformer"]["params"] > 100_000_000


def test_trace_written_on_request_is_simruns(tmp_path, scenario):
    sc = cs.load(scenario("dp_vs_ddp_4x1080ti.json"), set={"training.steps": 2})
    r = cs.simulate(sc, trace=tmp_path / "a.json")
    r.write_trace(tmp_path / "b.json")
    a = (tmp_path / "a.json").read_bytes()
    assert a == (tmp_path / "b.json").read_bytes()
    events = json.loads(a)["traceEvents"]
    assert any(e.get("name", "").startswith("ProfilerStep#") for e in events)


def test_bad_input_raises_input_error_with_simruns_text(tmp_path, scenario):
    with pytest.raises(cs.InputError) as e:
        cs.load(scenario("dp_vs_ddp_4x1080ti.json"), set={"strategy.bucket_size": 1})
    err = e.value
    assert "dp_vs_ddp_4x1080ti.json" in err.file
    assert "bucket_size" in err.json_path + err.message
    # The text simrun prints after "simrun: ": FILE: PATH: MESSAGE (hint: HINT).
    expected = f"{err.file}: {err.json_path}: {err.message}" if err.json_path else \
        f"{err.file}: {err.message}"
    if err.hint:
        expected += f" (hint: {err.hint})"
    assert str(err) == expected
    assert isinstance(err, ValueError) and isinstance(err, cs.Error)
    with pytest.raises(cs.InputError) as e:
        cs.load(tmp_path / "missing.json")
    assert e.value.file.endswith("missing.json")
    with pytest.raises(cs.InputError):
        cs.simulate(scenario("dp_vs_ddp_4x1080ti.json"), backend="tpu")
    # An unknown launch mode names the argument (processes runs: test_processes.py).
    with pytest.raises(cs.InputError) as e:
        cs.simulate(scenario("single_gpu_linear.json"), backend="standin", launch="forked")
    assert e.value.json_path == "launch" and "forked" in e.value.message


def test_cuda_without_a_gpu_raises_backend_unavailable(scenario):
    # The 1080 Ti (compute capability 6.1) runs under no CUDA 12+ build, so this raises with or
    # without a GPU on the machine: no GPU, or a GPU the scenario's GPU cannot be.
    with pytest.raises(cs.BackendUnavailable) as e:
        cs.simulate(scenario("dp_vs_ddp_4x1080ti.json"), backend="cuda")
    assert str(e.value)


def test_a_long_simulation_lets_other_threads_run(scenario):
    # With the GIL held through the call, a Python thread could not run a single bytecode until
    # it returned; released, the counter thread keeps counting while the 512-GPU run simulates.
    sc = cs.load(scenario("llama3_70b_512xh100_3d.json"), set={"training.steps": 4})
    count, stop = [0], threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=counter)
    t.start()
    while count[0] == 0:  # the counter has started
        pass
    before = count[0]
    r = cs.simulate(sc)
    during = count[0] - before
    stop.set()
    t.join()
    assert r.complete
    assert during > 1000


def test_four_threads_give_the_same_results_as_in_series(scenario):
    # Four variants (two strategies x two batches): each run in series, then all four at once
    # on four threads (the GIL released during each run); the summaries must be identical.
    variants = [{"strategy.kind": k, "training.global_batch": b}
                for k in ("data_parallel", "ddp") for b in (64, 128)]
    scenarios = [cs.load(scenario("dp_vs_ddp_4x1080ti.json"), set=v) for v in variants]
    series = [cs.simulate(s).to_dict() for s in scenarios]
    parallel = [None] * 4

    def work(i):
        parallel[i] = cs.simulate(scenarios[i]).to_dict()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert parallel == series
    assert len({json.dumps(s, sort_keys=True) for s in series}) == 4  # the variants differ


def test_per_rank_writes_one_trace_per_gpu(tmp_path, scenario):
    # The 4-GPU server: one trace file per GPU, each a Chrome trace with its own events.
    sc = cs.load(scenario("dp_vs_ddp_4x1080ti.json"), set={"training.steps": 2})
    cs.simulate(sc, per_rank=tmp_path / "ranks")
    files = sorted((tmp_path / "ranks").glob("*.json"))
    assert len(files) == 4
    for f in files:
        assert json.loads(f.read_text())["traceEvents"]
