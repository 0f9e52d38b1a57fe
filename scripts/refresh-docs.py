#!/usr/bin/env python3
"""Regenerates the figures quoted in README.md and docs/*.md from the built tools, so that no
figure is typed by hand (docs/ci.md, "Docs").

A generated figure sits between markers in the Markdown source:

    22.9 GiB<!-- fig:dp_memory_output_device -->  ...  is written as
    <!-- fig:NAME -->TEXT<!-- /fig -->

and this script replaces TEXT with what FIGURES[NAME] computes now. `--check` changes nothing and
exits 1, listing the stale figures, when any differs (a CTest runs it on Release builds:
`docs:figures_fresh`); unknown names and figures without markers are errors too.

Figures that measure speed (wall time, events per second) are `timed`: they are refreshed on
request (`--timed`) and never checked, since they depend on the machine (DEVELOPERS.md: quote
performance as measured, never assert it).

usage: scripts/refresh-docs.py [--check] [--timed] [--build-dir build/release]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = re.compile(r"<!-- fig:([a-z0-9_]+) -->(.*?)<!-- /fig -->", re.S)


class Ctx:
    def __init__(self, build, tmp):
        self.build, self.tmp, self.cache = build, tmp, {}

    def tool(self, name):
        return os.path.join(self.build, "tools", name)

    def run(self, args, ok=(0,)):
        """Runs a tool (args[0] names it) in the repository root; cached by its arguments."""
        key = tuple(args)
        if key not in self.cache:
            p = subprocess.run([self.tool(args[0])] + list(args[1:]), cwd=ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if p.returncode not in ok:
                raise RuntimeError(f"{' '.join(args)} exited {p.returncode}:\n{p.stdout[-3000:]}")
            self.cache[key] = p.stdout
        return self.cache[key]

    def summary(self, scenario, *sets):
        """The summary JSON of `simrun SCENARIO --set ...`."""
        out = os.path.join(self.tmp, f"s{len(self.cache)}.json")
        args = ["simrun", scenario, "-q", "--no-advice", "--summary", out]
        for s in sets:
            args += ["--set", s]
        self.run(args)
        with open(out) as f:
            return json.load(f)

    def trace(self, name, scenario, *sets):
        path = os.path.join(self.tmp, name)
        args = ["simrun", scenario, "-q", "--no-advice", "-o", path]
        for s in sets:
            args += ["--set", s]
        self.run(args)
        return path


GIB = 1024.0 ** 3


def dp_memory(c):
    # README: GPT-2 small under DataParallel on 8 A100s: output_device against the others.
    s = c.summary("scenarios/gpt2_small_8xa100.json")
    peaks = {g["gpu"]: g["peak_bytes"] / GIB for g in s["per_gpu"]}
    others = [v for g, v in peaks.items() if g != 0]
    return (f"{peaks[0]:.1f} GiB against {max(others):.1f} GiB on the others "
            f"(imbalance {s['imbalance']:.2f}×)")


def ddp_step(c):
    s = c.summary("scenarios/dp_vs_ddp_4x1080ti.json", "strategy.kind=ddp")
    return f"{s['step_time_s'] * 1e3:.2f} ms"


def dp_step(c):
    s = c.summary("scenarios/dp_vs_ddp_4x1080ti.json")
    return f"{s['step_time_s'] * 1e3:.2f} ms"


def ci_diff(c):
    # README "Guard a training setup in CI": the tracediff verdict of a 200 MB bucket.
    base = c.trace("base.json", "scenarios/dp_vs_ddp_4x1080ti.json", "strategy.kind=ddp")
    new = c.trace("new.json", "scenarios/dp_vs_ddp_4x1080ti.json", "strategy.kind=ddp",
                  "strategy.ddp.bucket_cap_mb=200")
    out = os.path.join(c.tmp, "diff.json")
    c.run(["tracediff", base, new, "--tolerance", "2%", "--json", out], ok=(1,))
    with open(out) as f:
        d = json.load(f)
    m = {r["metric"]: r for r in d["rows"]}
    step = m["step_time"]["change_rel"] * 100
    comm = m["exposed_comm"]["new"]["median"] / m["exposed_comm"]["base"]["median"]
    return f"step time {step:+.1f} %, exposed comm ×{comm:.2f}"


def bench(c, name):
    key = ("bench", name)
    if key not in c.cache:
        p = subprocess.run([os.path.join(c.build, "bench", name)], cwd=ROOT, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            raise RuntimeError(f"{name} exited {p.returncode}:\n{p.stdout[-3000:]}")
        c.cache[key] = p.stdout
    return c.cache[key]


def accuracy_table(c):
    # docs/accuracy.md: bench_accuracy's table and its totals, as printed.
    out = bench(c, "bench_accuracy")
    start = out.index("| case | what | published |")
    end = out.index("\n", out.index("Outside 10 % or not predicted:"))
    return "\n" + out[start:end].strip() + "\n"


def accuracy_cases(c):
    m = re.search(r"Cases: (\d+); predicted: \d+; within 10 % \(reproduced\): (\d+)\.",
                  bench(c, "bench_accuracy"))
    return f"all {m.group(1)} cases, {m.group(2)} within 10 %"


def ci_table(c):
    # docs/ci.md: the header and the four headline rows of the same tracediff as ci_diff.
    ci_diff(c)
    base, new = os.path.join(c.tmp, "base.json"), os.path.join(c.tmp, "new.json")
    out = c.run(["tracediff", base, new, "--tolerance", "2%"], ok=(1,))
    keep = [l for l in out.splitlines()
            if l.strip().startswith("change") or
            re.match(r"\s*[-+][\d.]+%\s+(exposed_comm|comm_overlap|step_time|throughput)\s", l)]
    return "\n```\n" + "\n".join(keep) + "\n```\n"


def backpressure_zero3(c):
    # docs/memory.md, "Allocation backpressure": simrun's step time, peak and notes on the
    # ZeRO-3 scenario whose host runs ahead.
    out = c.run(["simrun", "scenarios/gpt_20b_64xa100_zero3.json", "--no-advice"], ok=(0, 1))
    keep = [l for l in out.splitlines()
            if l.startswith(("step time:", "memory node", "OOM:", "note: allocator"))]
    return "\n```\n" + "\n".join(keep) + "\n```\n"


def steady_state_example(c):
    # docs/memory.md, "First-step and steady-state peaks": the two lines simrun prints.
    out = c.run(["simrun", "scenarios/gpt_20b_64xa100_3d.json", "--no-advice",
                 "--set", "model.gpt.layers=48", "--set", "strategy.pp=1",
                 "--set", "strategy.dp=8", "--set", "strategy.zero_stage=0",
                 "--set", "strategy.recompute=none", "--set", "training.global_batch=32",
                 "--set", "strategy.micro_batch_size=4", "--set", "training.steps=1"])
    keep = [l for l in out.splitlines() if "steady-state peak" in l or l.startswith("OOM:")]
    return "\n```\n" + "\n".join(keep) + "\n```\n"


def gil_variants(c):
    # docs/simview.md, "Threads, the GIL and processes": the three launch modes' summaries.
    runs = [([], "# threads + GIL"), (["host.gil=false"], "# GIL-free threads"),
            (["strategy.kind=ddp", "strategy.ddp.launcher=process"], "")]
    lines = []
    for sets, comment in runs:
        args = ["simrun", "scenarios/mlp_gil_4x1080ti.json"]
        for x in sets:
            args += ["--set", x]
        out = c.run(args)
        cmd = " ".join(["$"] + args[:1] + args[1:])
        lines.append(f"{cmd:<74}{comment}".rstrip() if comment else cmd)
        lines += [l for l in out.splitlines() if l.startswith(("step time:", "samples/s:"))]
    return "\n```sh\n" + "\n".join(lines) + "\n```\n"


def hpo_example(c):
    # docs/hpo.md, "Example": the whole output of the ASHA search behind the picture.
    out_file = os.path.join(c.tmp, "hpo_asha.json")
    out = c.run(["simrun", "hpo", "scenarios/mlp_1xh200.json", "--set", "cluster.gpus_per_node=4",
                 "--space", "training.global_batch=4096,8192", "--space", "param.lr=1e-4,3e-4,1e-3",
                 "--trials", "27", "--seed", "1", "--max-t", "27", "--startup-s", "0.05",
                 "-o", out_file])
    cmd = ("$ simrun hpo scenarios/mlp_1xh200.json --set cluster.gpus_per_node=4 --space "
           "training.global_batch=4096,8192 \\\n    --space param.lr=1e-4,3e-4,1e-3 --trials 27 "
           "--seed 1 --max-t 27 --startup-s 0.05 -o hpo_asha.json")
    return "\n```\n" + cmd + "\n" + out.replace(out_file, "hpo_asha.json").rstrip() + "\n```\n"


def block_eval(c, flag):
    key = ("bench_block_eval", flag)
    if key not in c.cache:
        p = subprocess.run([os.path.join(c.build, "bench", "bench_block_eval"), flag], cwd=ROOT,
                           text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            raise RuntimeError(f"bench_block_eval {flag} exited {p.returncode}:\n{p.stdout[-3000:]}")
        c.cache[key] = p.stdout
    return "\n" + c.cache[key].strip() + "\n"


def block_eval_accuracy(c):
    # docs/block-eval.md, "Accuracy": block path against the op-level simulator.
    return block_eval(c, "--markdown-accuracy")


def block_eval_speed(c):
    # docs/block-eval.md, "Speed": CPU ms per evaluation (timed).
    return block_eval(c, "--markdown-speed")


def fp8_example(c):
    # docs/fp8.md, "Summary figures": the bundled FP8 scenario against the same run in bf16.
    f = c.summary("scenarios/gpt_fp8_8xh100.json")
    b = c.summary("scenarios/gpt_fp8_8xh100.json", "training.precision=bf16")
    pf = max(g["peak_bytes"] for g in f["per_gpu"]) / GIB
    pb = max(g["peak_bytes"] for g in b["per_gpu"]) / GIB
    return (f"step {f['step_time_s'] * 1e3:.1f} ms in FP8 against {b['step_time_s'] * 1e3:.1f} ms "
            f"in bf16 ({b['step_time_s'] / f['step_time_s']:.3f}×), MFU {f['mfu']:.3f} against "
            f"{b['mfu']:.3f}, peak memory {pf:.2f} GiB against {pb:.2f} GiB per GPU")


def collective_sweep(c, cluster):
    # docs/collective.md, "Sweeps": all_reduce busbw by size from `simrun collective` for 8, 16,
    # 64 and 1,024 GPUs, each next to the nccl-tests bound busbw <= B: t >= 2(p-1)/p * S / B, so
    # busbw = 2(p-1)/p * S / t <= B, with B the node's NICs (nics_per_node x nic_gbps) across nodes
    # and the GPU's NVSwitch port (nvswitch_gbps) within one node.
    path = f"scenarios/clusters/{cluster}.json"
    with open(os.path.join(ROOT, path)) as f:
        spec = json.load(f)
    gpn = spec["gpus_per_node"]
    counts = [8, 16, 64, 1024]
    bound = {p: spec["intra"]["nvswitch_gbps"] if p <= gpn
             else spec["nics_per_node"] * spec["nic_gbps"] for p in counts}
    table = {}
    for p in counts:
        out = c.run(["simrun", "collective", path, "--gpus", str(p), "-b", "1M", "-e", "4G",
                     "-f", "4"])
        for line in out.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            f = line.split()
            table.setdefault(int(f[0]), {})[p] = (float(f[7]), f[8])

    def size(b):
        return f"{b >> 30} GiB" if b >= 1 << 30 else f"{b >> 20} MiB"

    head = "| size | " + " | ".join(f"{p} GPUs (B = {bound[p]:g} GB/s)" for p in counts) + " |"
    rows = [head, "| --- |" + " --- |" * len(counts)]
    for b in sorted(table):
        cells = [f"{table[b][p][0]:.1f} ({100 * table[b][p][0] / bound[p]:.0f} %, "
                 f"{table[b][p][1]})" for p in counts]
        rows.append(f"| {size(b)} | " + " | ".join(cells) + " |")
    return "\n\n" + "\n".join(rows) + "\n\n"


def per_rank_sizes(c):
    # docs/limits.md, "Per-rank files": simrun's estimate of every rank's --per-rank files for the
    # bundled scenarios above 10 M events (the refusal's own figures, with the limit at 1), against
    # the default limits.max_per_rank_events; the 1,024+-GPU ones at 3 steps too.
    def estimate(scenario, *sets):
        args = ["simrun", scenario, "-q", "--per-rank", os.path.join(c.tmp, "per_rank_none"),
                "--set", "limits.max_per_rank_events=1"]
        for s in sets:
            args += ["--set", s]
        out = c.run(args, ok=(2,))
        m = re.search(r"would write about (\d+) events \((\d+) steps x.*?about ([\d.]+) GB of "
                      r"JSON in (\d+) files", out, re.S)
        return int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))

    limit = 50_000_000  # core/scenario.hpp, ScenarioLimits::max_per_rank_events
    rows = ["| scenario | steps | events | JSON | files | `--per-rank` by default |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name in sorted(os.listdir(os.path.join(ROOT, "scenarios"))):
        if not name.endswith(".json"):
            continue
        runs = [()]
        with open(os.path.join(ROOT, "scenarios", name)) as f:
            if json.load(f).get("training", {}).get("steps", 3) < 3:
                runs.append(("training.steps=3",))
        for sets in runs:
            events, steps, gb, files = estimate("scenarios/" + name, *sets)
            if events < 10_000_000:
                continue
            verdict = "written" if events <= limit else "refused (hint: --per-rank-representatives)"
            rows.append(f"| `{name[:-5]}` | {steps} | {events / 1e6:.1f} M | {gb} GB | {files:,} | "
                        f"{verdict} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


FIGURES = {
    "per_rank_sizes": (per_rank_sizes, False),
    "collective_sweep_dgx_a100": (lambda c: collective_sweep(c, "dgx_a100"), False),
    "collective_sweep_dgx_h100": (lambda c: collective_sweep(c, "dgx_h100"), False),
    "fp8_example": (fp8_example, False),
    "block_eval_accuracy": (block_eval_accuracy, False),
    "block_eval_speed": (block_eval_speed, True),
    "hpo_example": (hpo_example, False),
    "gil_variants": (gil_variants, False),
    "steady_state_example": (steady_state_example, False),
    "backpressure_zero3": (backpressure_zero3, False),
    "ci_table": (ci_table, False),
    "accuracy_table": (accuracy_table, False),
    "accuracy_cases": (accuracy_cases, False),
    "dp_memory": (dp_memory, False),
    "ddp_step": (ddp_step, False),
    "dp_step": (dp_step, False),
    "ci_diff": (ci_diff, False),
}


def docs_files():
    yield os.path.join(ROOT, "README.md")
    d = os.path.join(ROOT, "docs")
    for name in sorted(os.listdir(d)):
        if name.endswith(".md"):
            yield os.path.join(d, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--timed", action="store_true", help="also refresh the timed figures")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    a = ap.parse_args()
    stale, used, errors = [], set(), []
    with tempfile.TemporaryDirectory(prefix="csim_docs_") as tmp:
        c = Ctx(os.path.abspath(a.build_dir), tmp)
        values = {}

        def value(name):
            if name not in values:
                values[name] = FIGURES[name][0](c)
            return values[name]

        for path in docs_files():
            with open(path) as f:
                text = f.read()
            rel = os.path.relpath(path, ROOT)

            def replace(m):
                name, old = m.group(1), m.group(2)
                used.add(name)
                if name not in FIGURES:
                    errors.append(f"{rel}: unknown figure '{name}'")
                    return m.group(0)
                fn, timed = FIGURES[name]
                if timed and not a.timed:
                    return m.group(0)
                new = value(name)
                if new != old:
                    stale.append(f"{rel}: fig:{name}: '{old}' is now '{new}'")
                return f"<!-- fig:{name} -->{new}<!-- /fig -->"

            out = MARK.sub(replace, text)
            if out != text and not a.check:
                with open(path, "w") as f:
                    f.write(out)
    for name in FIGURES:
        if name not in used:
            errors.append(f"figure '{name}' is quoted nowhere (remove it or quote it)")
    for line in errors + stale:
        print(line)
    if errors:
        return 2
    if a.check and stale:
        print(f"{len(stale)} stale figures: run scripts/refresh-docs.sh and commit the result")
        return 1
    print(f"refresh-docs: {len(values)} figures computed, {len(stale)} "
          f"{'stale' if a.check else 'updated'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
