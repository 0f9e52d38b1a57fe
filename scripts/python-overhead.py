#!/usr/bin/python3
"""The per-call overhead of clustersim.simulate against simrun (docs/python.md, "Overhead"): each
small bundled scenario run once by `simrun SCENARIO -q --summary FILE` (a process: start, load,
run, summary written) and once by cs.simulate(cs.load(SCENARIO)) in this interpreter (module
already imported), wall time of each and their ratio. One run each: the figures are as measured
on this machine, not a benchmark.

usage: PYTHONPATH=build/release/python /usr/bin/python3 scripts/python-overhead.py [BUILD_DIR]
"""
import os
import subprocess
import sys
import tempfile
import time

import clustersim as cs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = ["single_gpu_linear.json", "mlp_1xh200.json", "dp_vs_ddp_4x1080ti.json",
             "transformer_tiny_1xh200.json", "gpt2_small_8xa100.json"]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release")
    simrun = os.path.join(build, "tools", "simrun")
    print(f"{'scenario':<30} {'simrun ms':>10} {'cs.simulate ms':>15} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in SCENARIOS:
            path = os.path.join(ROOT, "scenarios", name)
            t0 = time.perf_counter()
            subprocess.run([simrun, path, "-q", "--no-advice", "--summary",
                            os.path.join(tmp, "s.json")], check=True)
            t_cli = time.perf_counter() - t0
            t0 = time.perf_counter()
            cs.simulate(cs.load(path))
            t_py = time.perf_counter() - t0
            print(f"{name:<30} {t_cli * 1e3:10.1f} {t_py * 1e3:15.1f} {t_py / t_cli:7.2f}")


if __name__ == "__main__":
    main()
