"""diff through the module: tracediff's comparison of two summaries (docs/tracediff.md)."""

import clustersim as cs


def summary(root, name):
    return root / "traces" / name


def test_a_run_against_itself_has_no_regression(root):
    s = summary(root, "dp_vs_ddp_4x1080ti.summary.json")
    d = cs.diff(s, s)
    assert not d["regressed"] and d["regressions"] == 0 and d["improvements"] == 0


def test_ddp_against_dataparallel_is_faster_and_the_reverse_a_regression(root):
    dp = summary(root, "dp_vs_ddp_4x1080ti.summary.json")
    ddp = summary(root, "dp_vs_ddp_4x1080ti_ddp.summary.json")
    # The goldens: DataParallel steps in 0.249 s, DDP in 0.196 s, a 21 % shorter step, beyond
    # the 2 % tolerance: an improvement one way, a regression the other.
    forward = cs.diff(dp, ddp, tolerance=0.02)
    rows = forward["rows"].set_index("metric")
    assert rows.loc["step_time", "status"] == "improved"
    backward = cs.diff(ddp, dp, tolerance=0.02)
    assert backward["regressed"]
    assert backward["rows"].set_index("metric").loc["step_time", "status"] == "regression"


def test_a_missing_file_is_an_input_error(root, tmp_path):
    try:
        cs.diff(tmp_path / "none.json", summary(root, "dp_vs_ddp_4x1080ti.summary.json"))
    except cs.InputError as e:
        assert e.file.endswith("none.json")
    else:
        raise AssertionError("no InputError")
