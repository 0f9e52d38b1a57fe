"""docs/python.md's example: the script runs as the docs show it and draws its two plots."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("pandas")


def test_the_example_runs_and_writes_its_plots(root, tmp_path):
    script = root / "docs" / "python_example.py"
    p = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=root, text=True,
                       capture_output=True, env=dict(os.environ, MPLBACKEND="Agg"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("DataParallel: step") and lines[1].startswith("         DDP: step")
    assert "x faster per step" in lines[2]
    for name in ("python_batch_sweep.png", "python_memory_imbalance.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # The docs quote the script itself and its output (scripts/refresh-docs.py writes both).
    doc = (root / "docs" / "python.md").read_text()
    assert script.read_text().strip() in doc
    assert p.stdout.strip() in doc
