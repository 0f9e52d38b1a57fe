"""sweep, tune, collective and replay through the module; the sweep's CSV read by pandas."""

import json
import math

import pytest

import clustersim as cs

pandas = pytest.importorskip("pandas")


def test_sweep_rows_are_a_dataframe_fitting_first(scenario):
    sc = cs.load(scenario("dp_vs_ddp_4x1080ti.json"))
    df = cs.sweep(sc, grid={"strategy.kind": ["data_parallel", "ddp"],
                            "training.global_batch": [64, 128, 256, 512]}, jobs=2)
    assert df.attrs["complete"]
    assert len(df) == 8  # 2 kinds x 4 batches
    # 1080 Ti (11 GiB): batch 512 fits under neither kind (docs/memory.md), the rest do; fitting
    # rows come first, best throughput first (the same rule as simrun sweep's file).
    assert list(df["status"]) == ["ok"] * 6 + ["oom"] * 2
    assert set(df[df.status == "oom"]["training.global_batch"]) == {512}
    ok = df[df.status == "ok"]["samples_per_s"].tolist()
    assert ok == sorted(ok, reverse=True)
    # Each row is the single run of its variant (block evaluation within 1 % of the op level).
    one = cs.simulate(cs.load(sc, set={"strategy.kind": "ddp", "training.global_batch": 128}))
    row = df[(df["strategy.kind"] == "ddp") & (df["training.global_batch"] == 128)].iloc[0]
    assert math.isclose(row.step_time_s, one.step_time_s, rel_tol=0.01)


def test_sweep_csv_is_read_by_pandas_as_it_is(tmp_path, scenario):
    out = tmp_path / "r.csv"
    df = cs.sweep(scenario("dp_vs_ddp_4x1080ti.json"),
                  grid={"training.global_batch": [64, 128, 512]}, output=out)
    read = pandas.read_csv(out)
    assert list(read.columns[:3]) == ["index", "training.global_batch", "status"]
    assert len(read) == 3
    assert list(read["training.global_batch"]) == list(df["training.global_batch"])
    # The provenance is beside it, not in it.
    meta = json.loads((tmp_path / "r.csv.meta.json").read_text())
    assert meta["complete"] and meta["done"] == 3 and meta["keys"] == ["training.global_batch"]
    # JSON Lines as well: one row object a line.
    cs.sweep(scenario("dp_vs_ddp_4x1080ti.json"),
             grid={"training.global_batch": [64, 128, 512]}, output=tmp_path / "r.jsonl")
    lines = pandas.read_json(tmp_path / "r.jsonl", lines=True)
    assert list(lines["status"]) == list(read["status"])


def test_sweep_refuses_an_unknown_knob(scenario):
    with pytest.raises(cs.InputError) as e:
        cs.sweep(scenario("dp_vs_ddp_4x1080ti.json"), grid={"strategy.bucket_size": [1, 2]})
    assert "bucket_size" in str(e.value)


def test_tune_finds_a_fitting_layout(scenario):
    # GPT-2 small on 8 A100s: the report lists at most `top` fitting layouts, fastest first, as
    # simrun tune -o writes them.
    report = cs.tune(scenario("gpt2_small_8xa100.json"), top=3, jobs=2)
    assert report["complete"]
    ranking = report["ranking"]
    assert 1 <= len(ranking) <= 3
    steps = [l["step_time_ms"] for l in ranking]
    assert steps == sorted(steps)
    # The best layout's --set values, simulated alone, give its step time (the block
    # evaluation is within 1 % of the op-level run, docs/block-eval.md).
    sets = dict(s.split("=", 1) for s in ranking[0]["sets"])
    one = cs.simulate(cs.load(scenario("gpt2_small_8xa100.json"),
                              set={k: json.loads(v) for k, v in sets.items()}))
    assert math.isclose(one.step_time_s * 1e3, steps[0], rel_tol=0.01)


def test_collective_bus_bandwidth_grows_with_size(root):
    # A ring all-reduce's bus bandwidth rises with the message size towards the link bandwidth
    # (latency amortised: docs/collective.md), so the largest size has the highest busbw.
    df = cs.collective(root / "scenarios/clusters/dgx_h100.json",
                       op="all_reduce", sizes=("1K", "64M"), factor=4, gpus=8)
    assert df["size_bytes"].iloc[0] == 1024 and df["size_bytes"].iloc[-1] == 64 << 20
    assert df["busbw_gb_s"].iloc[-1] == df["busbw_gb_s"].max()
    assert (df["ranks"] == 8).all()
