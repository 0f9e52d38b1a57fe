"""cs.sweep(output=PATH) resumes as simrun sweep -o does (sweep::SweepFile, docs/sweep.md,
"Resume"): an interrupted sweep's file keeps what finished, marked incomplete; the same call
again keeps those rows, simulates the rest, and writes the file an uninterrupted sweep writes."""

import json

import pytest

import clustersim as cs

pandas = pytest.importorskip("pandas")

GRID = {"strategy.kind": ["data_parallel", "ddp"], "training.global_batch": [32, 64, 128, 512]}


def stop_after(n, seen):
    """An on_row callback that stops the sweep once n rows have finished: the stop is an
    observable event (the n-th row), not a time."""
    def on_row(row):
        seen.append(row)
        return len(seen) < n
    return on_row


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "json"])
def test_an_interrupted_sweep_resumes_to_the_uninterrupted_file(tmp_path, scenario, suffix):
    sc = cs.load(scenario("dp_vs_ddp_4x1080ti.json"))
    whole = tmp_path / f"whole.{suffix}"
    full = cs.sweep(sc, GRID, output=whole)
    assert full.attrs["complete"] and len(full) == 8  # 2 kinds x 4 batches

    # Stopped after 3 rows: one worker (jobs=1) checks the stop before each next variant, so
    # exactly 3 are simulated and written, the file marked incomplete.
    part = tmp_path / f"part.{suffix}"
    seen = []
    first = cs.sweep(sc, GRID, output=part, on_row=stop_after(3, seen))
    assert first.attrs["complete"] is False
    assert len(first) == 3 and len(seen) == 3
    meta_path = part if suffix == "json" else tmp_path / f"part.{suffix}.meta.json"
    meta = json.loads(meta_path.read_text())
    meta = meta.get("header", meta)
    assert meta["complete"] is False

    # The same call resumes: the 3 rows are kept (their variants not simulated again: on_row
    # sees only the 5 others), and the file is the uninterrupted sweep's, byte for byte (the
    # results file holds no wall-clock figure, docs/sweep.md).
    again = []
    second = cs.sweep(sc, GRID, output=part, on_row=lambda row: again.append(row))
    assert second.attrs["complete"] is True
    assert len(again) == 5
    done_first = {(r["strategy.kind"], json.loads(r["training.global_batch"])) for r in seen}
    done_again = {(r["strategy.kind"], json.loads(r["training.global_batch"])) for r in again}
    assert len(done_first) == 3 and not done_first & done_again
    assert part.read_bytes() == whole.read_bytes()
    if suffix != "json":
        assert (tmp_path / f"part.{suffix}.meta.json").read_bytes() == \
            (tmp_path / f"whole.{suffix}.meta.json").read_bytes().replace(b"whole.", b"part.")
    # The rows returned are the file's, kept and new: the uninterrupted sweep's rows. The kept
    # ones are read back from the file, which holds the figures to its precision (the CSV's
    # %.6g, sweep/results_io.cpp): equal to that precision.
    pandas.testing.assert_frame_equal(second, full, check_exact=False, rtol=1e-5)


def test_fresh_starts_over_and_another_sweep_is_refused(tmp_path, scenario):
    sc = cs.load(scenario("dp_vs_ddp_4x1080ti.json"))
    out = tmp_path / "r.csv"
    cs.sweep(sc, {"training.global_batch": [32, 64]}, output=out, on_row=lambda row: False)
    # fresh=True ignores the 1 row kept: both variants are simulated.
    seen = []
    df = cs.sweep(sc, {"training.global_batch": [32, 64]}, output=out, fresh=True,
                  on_row=lambda row: seen.append(row))
    assert df.attrs["complete"] and len(seen) == 2
    # Another sweep's keys in the file: refused as simrun sweep refuses it, one InputError.
    with pytest.raises(cs.InputError) as e:
        cs.sweep(sc, {"training.steps": [2, 3]}, output=out)
    assert str(out) in str(e.value)


def test_an_exception_in_on_row_stops_the_sweep_and_is_raised(scenario):
    def boom(row):
        raise RuntimeError("stop here")
    with pytest.raises(RuntimeError, match="stop here"):
        cs.sweep(scenario("dp_vs_ddp_4x1080ti.json"), {"training.global_batch": [32, 64, 128]},
                 on_row=boom)
