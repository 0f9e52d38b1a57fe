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
performance as measured, never assert it). Figures that measure memory and time together are
`measured`: `--check` compares their peak-RSS figures (KiB) within MEASURED_TOLERANCE and never
their times; they are rewritten with `--timed`, or when their memory moved beyond it.

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


def python_example_source(c):
    """docs/python_example.py as docs/python.md shows it."""
    with open(os.path.join(ROOT, "docs", "python_example.py")) as f:
        return "\n```python\n" + f.read() + "```\n"


def python_example_output(c):
    """What docs/python_example.py prints, run with Debian's python3 on the clustersim module of
    the build tree; its plots go to docs/images (to a scratch folder with --check). None when the
    module is not built (no pybind11-dev)."""
    if not os.path.isdir(os.path.join(c.build, "python", "clustersim")):
        return None
    images = c.tmp if c.check else os.path.join(ROOT, "docs", "images")
    env = dict(os.environ, PYTHONPATH=os.path.join(c.build, "python"), MPLBACKEND="Agg")
    p = subprocess.run(["/usr/bin/python3", "docs/python_example.py", images], cwd=ROOT,
                       text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"docs/python_example.py exited {p.returncode}:\n{p.stdout[-3000:]}")
    return "\n```\n" + p.stdout + "```\n"


def python_overhead(c):
    """scripts/python-overhead.py's table (timed: as measured on this machine)."""
    if not os.path.isdir(os.path.join(c.build, "python", "clustersim")):
        return None
    env = dict(os.environ, PYTHONPATH=os.path.join(c.build, "python"))
    p = subprocess.run(["/usr/bin/python3", "scripts/python-overhead.py", c.build], cwd=ROOT,
                       text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"scripts/python-overhead.py exited {p.returncode}:\n{p.stdout[-3000:]}")
    return "\n```\n" + p.stdout + "```\n"


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
    # docs/accuracy.md: bench_accuracy's rows, families and totals, as printed.
    out = bench(c, "bench_accuracy")
    start = out.index("| case | set | family |")
    end = out.index("\n", out.index("Not predicted:"))
    return "\n" + out[start:end].strip() + "\n"


def accuracy_cases(c):
    m = re.search(r"Rows: (\d+) \((\d+) calibration, (\d+) development\); predicted: (\d+); "
                  r"within 10 %: (\d+)\.", bench(c, "bench_accuracy"))
    return (f"{m.group(1)} published rows ({m.group(2)} calibration, {m.group(3)} development), "
            f"{m.group(4)} predicted, {m.group(5)} within 10 %")


def ci_table(c):
    # docs/ci.md: the header and the four headline rows of the same tracediff as ci_diff.
    ci_diff(c)
    base, new = os.path.join(c.tmp, "base.json"), os.path.join(c.tmp, "new.json")
    out = c.run(["tracediff", base, new, "--tolerance", "2%"], ok=(1,))
    keep = [l for l in out.splitlines()
            if l.strip().startswith("change") or
            re.match(r"\s*[-+][\d.]+%\s+(exposed_comm|comm_overlap|step_time|throughput)\s", l)]
    return "\n```text\n" + "\n".join(keep) + "\n```\n"


def tracediff_output(c):
    # docs/tracediff.md, "Output": a DDP bucket of 200 MB against 25 MB, the commands and
    # tracediff's whole output as printed (a console block: docs:commands runs the commands).
    ddp = ["simrun", "scenarios/dp_vs_ddp_4x1080ti.json", "--set", "strategy.kind=ddp"]
    bucket = ddp + ["--set", "strategy.ddp.bucket_cap_mb=200"]
    c.run(ddp + ["-q", "-o", os.path.join(c.tmp, "ddp.json")])
    c.run(bucket + ["-q", "-o", os.path.join(c.tmp, "ddp_bucket200.json")])
    p = subprocess.run([c.tool("tracediff"), "ddp.json", "ddp_bucket200.json", "--top", "8"],
                       cwd=c.tmp, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 1:
        raise RuntimeError(f"tracediff exited {p.returncode}, not 1:\n{p.stdout[-3000:]}")
    lines = ["$ " + " ".join(ddp + ["-q", "-o", "ddp.json"]),
             "$ " + " ".join(bucket + ["-q", "-o", "ddp_bucket200.json"]),
             "$ tracediff ddp.json ddp_bucket200.json --top 8   # exit 1: a regression"]
    return "\n```console\n" + "\n".join(lines) + "\n" + p.stdout.rstrip() + "\n```\n"


def backpressure_zero3(c):
    # docs/memory.md, "Allocation backpressure": simrun's step time, peak and notes on the
    # ZeRO-3 scenario whose host runs ahead.
    out = c.run(["simrun", "scenarios/gpt_20b_64xa100_zero3.json", "--no-advice"], ok=(0, 1))
    keep = [l for l in out.splitlines()
            if l.startswith(("step time:", "memory node", "OOM:", "note: allocator"))]
    return "\n```text\n" + "\n".join(keep) + "\n```\n"


def korthikanti_fig1_memory(c):
    # docs/memory.md, "Korthikanti et al. 2022, Figure 1": GPU 0's bytes by category at its peak
    # (summary JSON peak_by_category_bytes) against the development row's published figures.
    row = next(r for r in json.load(open(os.path.join(
        ROOT, "calibration/published/development-set.json")))["cases"]
        if r["id"] == "korthikanti_fig1_mem_gpt3-175B")["expected"]["value"]
    scen = "calibration/scenarios/korthikanti_fig1_mem_gpt3-175B.json"

    def gpu0(*sets):
        g = next(g for g in c.summary(scen, *sets)["per_gpu"] if g["gpu"] == 0)
        return g["peak_by_category_bytes"]

    # The file is the variant without recompute or sequence parallelism, one step; two steps so
    # that Adam's state (allocated at the first step()) is there at the activation peak.
    none = gpu0("training.steps=2")
    sel = gpu0("training.steps=2", "strategy.sequence_parallel=true", "strategy.recompute=selective")
    states = (sel["params"] + sel["grads"] + sel["optimizer"]) / GIB

    def line(what, pub, ours, note=""):
        return f"| {what} | {pub:.2f} GiB | {ours:.2f} GiB{note} | {100 * (ours / pub - 1):+.1f} % |"

    rows = ["| | published (Figure 1) | simulated | |", "| --- | --- | --- | --- |",
            line("params + grads + optimizer", row["params_grads_optimizer"], states,
                 f" ({states * GIB / (sel['params'] / 2):.0f} B × P)"),
            line("activations, SP + selective recompute (`--set strategy.sequence_parallel=true "
                 "--set strategy.recompute=selective`)", row["activations_sp_selective"],
                 sel["activations"] / GIB),
            line("activations, neither (the file as it is)", row["activations_no_recompute_no_sp"],
                 none["activations"] / GIB)]
    return ("\n" + "\n".join(rows) + f"\n\nInside `step()` the fp16 main-grad copy (4 P) raises "
            f"the model states to {states * 1.25:.2f} GiB, with no activations left.\n")


def fsdp2_reserved(c):
    # docs/memory.md, "What FSDP2 runs reserve above what they allocate": simrun's memory lines,
    # OOM line and allocator note for the bundled torchtitan run and three variants.
    runs = [[], ["training.allocator.expandable_segments=false"],
            ["training.global_batch=16", "strategy.micro_batch_size=2"],
            ["training.global_batch=16", "strategy.micro_batch_size=2",
             "training.allocator.expandable_segments=false"]]
    lines = []
    for sets in runs:
        args = ["simrun", "scenarios/llama3_1_8b_8xh100_fsdp2.json", "--no-advice"]
        for x in sets:
            args += ["--set", x]
        out = c.run(args, ok=(0, 1))
        lines.append("$ " + " ".join(args))
        lines += [l for l in out.splitlines()
                  if l.startswith(("memory node", "OOM:", "note: caching allocator"))]
    return "\n```text\n" + "\n".join(lines) + "\n```\n"


def steady_state_example(c):
    # docs/memory.md, "First-step and steady-state peaks": the two lines simrun prints.
    out = c.run(["simrun", "scenarios/gpt_20b_64xa100_3d.json", "--no-advice",
                 "--set", "model.gpt.layers=48", "--set", "strategy.pp=1",
                 "--set", "strategy.dp=8", "--set", "strategy.zero_stage=0",
                 "--set", "strategy.recompute=none", "--set", "training.global_batch=32",
                 "--set", "strategy.micro_batch_size=4", "--set", "training.steps=1"])
    keep = [l for l in out.splitlines() if "steady-state peak" in l or l.startswith("OOM:")]
    return "\n```text\n" + "\n".join(keep) + "\n```\n"


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
    return "\n```console\n" + "\n".join(lines) + "\n```\n"


MOE_PAIR = [("balanced", "scenarios/mbridge2509_qwen3_30b_a3b_h100_16gpu.json"),
            ("zipf 0.5", "scenarios/qwen3_30b_a3b_16xh100_ep8_zipf.json")]


def moe_routing_pair(c):
    # docs/transformer.md, "Routing imbalance": the bundled balanced / zipf twins of Qwen3-30B-A3B
    # on 16 H100 (ep 8) from their `simrun --summary` JSON.
    runs = [(name, c.summary(path)) for name, path in MOE_PAIR]

    def gpus(s):
        return s.get("gpus") or len(s["per_gpu"])

    def ep_exposed(s):  # the ep group's exposed time per step, mean over GPUs
        g = [x for x in s["comm_by_group"] if x["group"] == "ep"]
        return (g[0]["exposed_s"] if g else 0.0) / gpus(s)

    def routing(s):
        return s["transformer"]["moe_routing"]

    def busiest(s):
        r = routing(s)
        if r["kind"] == "balanced":
            return "none (all equal)"
        return f"EP rank {r['busiest_ep_rank']} in {r['busiest_ep_rank_count']} of {r['samples']}"

    rows = [
        ("step time", lambda s: f"{s['step_time_s']:.2f} s", lambda s: s["step_time_s"]),
        ("tokens/s per GPU", lambda s: f"{s['transformer']['tokens_per_s_per_gpu']:,.0f}",
         lambda s: s["transformer"]["tokens_per_s_per_gpu"]),
        ("MFU", lambda s: f"{s['mfu'] * 100:.1f} %", lambda s: s["mfu"]),
        ("tokens max/mean per EP rank (mean over MoE layer passes; worst)",
         lambda s: (f"{routing(s)['tokens_per_ep_rank_max_over_mean']:.2f} "
                    f"({routing(s)['worst_tokens_per_ep_rank_max_over_mean']:.2f})"), None),
        ("tokens max/mean per expert",
         lambda s: f"{routing(s)['tokens_per_expert_max_over_mean']:.2f}", None),
        ("busiest EP rank (MoE layer passes)", busiest, None),
        ("exposed ep all-to-all per GPU per step",
         lambda s: f"{ep_exposed(s):.2f} s ({ep_exposed(s) / s['step_time_s'] * 100:.1f} % of the step)",
         ep_exposed),
    ]
    out = ["", "| | " + " | ".join(n for n, _ in runs) + " | zipf vs balanced |",
           "| --- | " + " | ".join("---" for _ in runs) + " | --- |"]
    for label, fmt_, raw in rows:
        cells = [fmt_(s) for _, s in runs]
        delta = ""
        if raw is not None and raw(runs[0][1]):
            delta = f"{(raw(runs[1][1]) / raw(runs[0][1]) - 1) * 100:+.1f} %"
        out.append(f"| {label} | " + " | ".join(cells) + f" | {delta} |")
    r = routing(runs[1][1])
    out.append("")
    out.append(f"Over {r['samples']:,} MoE layer passes per step (every MoE block x micro-batch) on "
               f"{gpus(runs[0][1])} GPUs; `simrun SCENARIO --summary S.json`, "
               "`transformer.moe_routing` and `comm_by_group` (group `ep`).")
    return "\n".join(out) + "\n"


MOE_DISPATCH = [("Qwen3-30B-A3B, 16 H100, ep 8 (in a node)",
                 "scenarios/mbridge2509_qwen3_30b_a3b_h100_16gpu.json"),
                ("DeepSeek-V3, 2,048 H800, ep 64 (8 nodes)",
                 "scenarios/deepseek_v3_2048xh800_pp16_ep64.json")]


def moe_dispatchers(c):
    # docs/program.md, "MoE token dispatchers": each bundled MoE layout under each dispatcher,
    # from `simrun SCENARIO --set strategy.moe_dispatcher=D --summary S.json`.
    out = ["", "| layout | dispatcher | step time | tokens/s per GPU | exposed ep exchange per GPU "
           "per step (share of the step) |", "| --- | --- | --- | --- | --- |"]
    for name, path in MOE_DISPATCH:
        for d in ("alltoall", "allgather", "deepep"):
            # In line (moe_a2a_overlap none) for all three: the allgather dispatcher has no
            # overlap, and the bundled DeepSeek-V3 layout overlaps its deepep exchanges.
            s = c.summary(path, f"strategy.moe_dispatcher={d}", "strategy.moe_a2a_overlap=none")
            gpus = s.get("gpus") or len(s["per_gpu"])
            g = [x for x in s["comm_by_group"] if x["group"] == "ep"]
            ep = (g[0]["exposed_s"] if g else 0.0) / gpus
            out.append(f"| {name} | `{d}` | {s['step_time_s']:.2f} s | "
                       f"{s['transformer']['tokens_per_s_per_gpu']:,.1f} | "
                       f"{ep:.2f} s ({ep / s['step_time_s'] * 100:.1f} %) |")
    out.append("")
    out.append("Every row with `--set strategy.moe_a2a_overlap=none` (the exchanges in line: the "
               "`allgather` dispatcher has no overlap, and the bundled DeepSeek-V3 layout overlaps "
               "its `deepep` exchanges). `comm_by_group`'s group `ep`: its exposed time summed over "
               "the GPUs, divided by their count.")
    return "\n".join(out) + "\n"


DEEPSEEK_2048 = "scenarios/deepseek_v3_2048xh800_pp16_ep64.json"
DUALPIPEV_ROWS = [
    ("1F1B, one block on the last stage, in line",
     ("strategy.schedule=1f1b", "strategy.moe_a2a_overlap=none",
      "strategy.stage_layers=[4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1]")),
    ("1F1B + `moe_a2a_overlap: \"1f1b\"`",
     ("strategy.schedule=1f1b", "strategy.stage_layers=[4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1]")),
    ("`dualpipev`, in line", ("strategy.moe_a2a_overlap=none",)),
    ("`dualpipev` + `moe_a2a_overlap: \"1f1b\"` (bundled)", ()),
]


def dualpipev(c):
    # docs/program.md, "DualPipeV": the bundled DeepSeek-V3 layout against its 1F1B form, each with
    # and without the F&B all-to-all overlap, from `simrun SCENARIO --set ... --summary S.json`.
    gib = 1024 ** 3
    out = ["", "| DeepSeek-V3, 2,048 H800 | step time | tokens/s per GPU | MFU | peak GPU 0 | "
           "worst peak |", "| --- | --- | --- | --- | --- | --- |"]
    for label, sets in DUALPIPEV_ROWS:
        s = c.summary(DEEPSEEK_2048, *sets)
        g = [x for x in s["per_gpu"] if "peak_bytes" in x]  # the simulated representatives
        worst = max(g, key=lambda x: x["peak_bytes"])
        oom = s.get("oom")
        worst_cell = (f"out of memory: GPU {oom['gpu']} at '{oom['op']}', would-be "
                      f"{oom['would_be_peak_bytes'] / gib:.2f} GiB" if oom else
                      f"{worst['peak_bytes'] / gib:.2f} GiB ({worst['name']})")
        out.append(f"| {label} | {s['step_time_s']:.2f} s | "
                   f"{s['transformer']['tokens_per_s_per_gpu']:,.1f} | {s['mfu'] * 100:.1f} % | "
                   f"{g[0]['peak_bytes'] / gib:.2f} GiB | {worst_cell} |")
    out.append("")
    out.append(f"Usable memory {g[0]['capacity_bytes'] / gib:.2f} GiB per GPU; `simrun "
               "scenarios/deepseek_v3_2048xh800_pp16_ep64.json --summary S.json` with the `--set`s "
               "each row names.")
    return "\n".join(out) + "\n"


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
    return "\n```console\n" + cmd + "\n" + out.replace(out_file, "hpo_asha.json").rstrip() + "\n```\n"


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


def sweep_bench(c):
    # bench_sweep three times (small scenarios, no GPT-3 variants) and once with its tune.
    key = ("sweep_bench",)
    if key not in c.cache:
        exe = os.path.join(c.build, "bench", "bench_sweep")
        runs = []
        for _ in range(3):
            p = subprocess.run([exe, "--variants", "4000", "--gpt3-variants", "1", "--no-tune"],
                               cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if p.returncode != 0:
                raise RuntimeError(f"bench_sweep exited {p.returncode}:\n{p.stdout[-3000:]}")
            runs.append(p.stdout)
        p = subprocess.run([exe, "--variants", "1", "--gpt3-variants", "1"], cwd=ROOT, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            raise RuntimeError(f"bench_sweep exited {p.returncode}:\n{p.stdout[-3000:]}")
        c.cache[key] = (runs, p.stdout)
    return c.cache[key]


def sweep_rate(c):
    # README "Find the best configuration": one-core variants/s of the one-GPU scenario, the
    # range over three runs of bench_sweep (timed: never checked).
    runs, _ = sweep_bench(c)
    rates = []
    for out in runs:
        m = re.search(r"^single_gpu_linear\.json\s+\d+\s+([\d.]+)", out, re.M)
        rates.append(float(m.group(1)))
    lo, hi = min(rates), max(rates)
    return f"{lo:,.0f}–{hi:,.0f}/s on one core for a one-GPU scenario, three runs of `bench_sweep`"


def sweep_speed_table(c):
    # docs/sweep.md, "Speed": the first of bench_sweep's three runs as a table (timed).
    runs, tune = sweep_bench(c)
    rows = ["| scenario | variants | 1 core | all cores |", "| --- | --- | --- | --- |"]
    for line in runs[0].splitlines():
        m = re.match(r"^(\S+\.json(?: \S+)?)\s+(\d+)\s+([\d.]+)\s+([\d.]+) \((\d+)\)", line)
        if m:
            rows.append(f"| {m.group(1)} | {int(m.group(2)):,} | {float(m.group(3)):,.1f} /s | "
                        f"{float(m.group(4)):,.1f} /s ({m.group(5)} cores) |")
    t = re.search(r"^tune .*$", tune, re.M).group(0)
    return "\n\n" + "\n".join(rows) + "\n\n`" + t + "`\n\n"


def tune_time(c):
    # README: the wall time of bench_sweep's tune of GPT-3 175B on 1,024 GPUs (timed).
    _, out = sweep_bench(c)
    m = re.search(r"tune gpt3_175b_1024xa100_3d: .*?, ([\d.]+) s on (\d+) cores", out)
    return f"{m.group(1)} s on {m.group(2)} cores"


def timed_run(c, label, argv, ok=(0, 2)):
    """(exit code, wall s, peak RSS KiB) of one tool run under /usr/bin/time; cached by label."""
    key = ("timed_run", label)
    if key not in c.cache:
        fmt = "%e %M"
        out = os.path.join(c.tmp, "time.txt")
        p = subprocess.run(["/usr/bin/time", "-f", fmt, "-o", out] + argv, cwd=ROOT, text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if p.returncode not in ok:
            raise RuntimeError(f"{label}: {' '.join(argv)} exited {p.returncode}")
        with open(out) as f:
            wall, rss = f.read().split()[-2:]
        c.cache[key] = (p.returncode, float(wall), int(rss))
    return c.cache[key]


def deep_file(c):
    # 200,000 nested arrays (400 KB): the worst case of docs/limits.md, "JSON nesting".
    path = os.path.join(c.tmp, "deep200k.json")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("[" * 200000 + "]" * 200000)
    return path


def limits_rows(c):
    tools = os.path.join(c.build, "tools")
    simrun = os.path.join(tools, "simrun")
    deep = deep_file(c)
    one_t = os.path.join(c.tmp, "1t.json")
    return [
        ("`simrun --help`", [simrun, "--help"]),
        ("`simrun tests/bad_inputs/limit_gpus_1e9.json` (10^9 GPUs)",
         [simrun, "tests/bad_inputs/limit_gpus_1e9.json"]),
        ("`simrun tests/bad_inputs/limit_steps_1e12.json` (10^12 steps)",
         [simrun, "tests/bad_inputs/limit_steps_1e12.json"]),
        ("`simrun tests/bad_inputs/limit_events_1e12.json` (≈ 1.4 × 10^12 events)",
         [simrun, "tests/bad_inputs/limit_events_1e12.json"]),
        ("`simrun tests/bad_inputs/deep_nesting.json` (20,000 nested arrays)",
         [simrun, "tests/bad_inputs/deep_nesting.json"]),
        ("`simrun deep.json` (200,000 nested arrays, 400 KB)", [simrun, deep]),
        ("`tracediff deep.json deep.json`", [os.path.join(tools, "tracediff"), deep, deep]),
        ("`trace_check deep.json`", [os.path.join(tools, "trace_check"), deep]),
        ("`simrun scenarios/gpt_1t_3072xa100_3d.json` (summary, no trace)",
         [simrun, "scenarios/gpt_1t_3072xa100_3d.json", "--no-advice"]),
        ("`simrun scenarios/gpt_1t_3072xa100_3d.json -q -o 1t.json` (trace written)",
         [simrun, "scenarios/gpt_1t_3072xa100_3d.json", "-q", "-o", one_t]),
    ]


def limits_measured(c):
    # docs/limits.md, "Measured": exit code, wall time and peak RSS of each run (measured: the
    # check compares the KiB within MEASURED_TOLERANCE, never the seconds).
    rows = ["| command | exit | time | peak RSS |", "| --- | --- | --- | --- |"]
    for label, argv in limits_rows(c):
        code, wall, rss = timed_run(c, label, argv)
        rows.append(f"| {label} | {code} | {wall:.2f} s | {rss:,} KiB |")
    return "\n\n" + "\n".join(rows) + "\n\n"


def trace_events(c, path):
    out = c.run(["trace_check", path])
    return int(re.search(r"ok: (\d+) events", out).group(1))


def bytes_per_event(c):
    # docs/limits.md, "Measured": (peak RSS of the 1T run - simrun's own) / the events of its
    # trace (trace_check's count), without and with the trace written.
    rows = dict(limits_rows(c))
    base = timed_run(c, "`simrun --help`", rows["`simrun --help`"])[2]
    labels = [l for l in rows if "gpt_1t" in l]
    plain = timed_run(c, labels[0], rows[labels[0]])[2]
    traced = timed_run(c, labels[1], rows[labels[1]])[2]
    events = trace_events(c, os.path.join(c.tmp, "1t.json"))
    per = lambda rss: (rss - base) * 1024 / events
    return (f"({plain:,} − {base:,}) KiB / {events:,} events ≈ {per(plain):.0f} bytes per event "
            f"simulated without a trace written and ({traced:,} − {base:,}) KiB ≈ "
            f"{per(traced):.0f} with one")


def bad_input_tally(c):
    # docs/limits.md, "The catalogue": tests_bad_cli's tally of this build.
    p = subprocess.run([os.path.join(c.build, "tests", "tests_bad_cli"), "[.tally]"], cwd=ROOT,
                       text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    m = re.search(r"catalogue: (\d+) cases run, (\d+) clean", p.stdout)
    if not m:
        raise RuntimeError("tests_bad_cli [.tally] printed no tally:\n" + p.stdout[-3000:])
    return f"{int(m.group(1)):,} cases, {int(m.group(2)):,} clean"


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
        # Sizes under 1 GB are given in MB (simrun_app.cpp, the refusal).
        m = re.search(r"would write about (\d+) events \((\d+) steps x.*?about ([\d.]+ [GM]B) of "
                      r"JSON in (\d+) files", out, re.S)
        if m is None:
            raise RuntimeError(f"{scenario}: simrun's --per-rank refusal not understood: {out}")
        return int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))

    limit = 50_000_000  # core/scenario/scenario.hpp, ScenarioLimits::max_per_rank_events
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
            events, steps, size, files = estimate("scenarios/" + name, *sets)
            if events < 10_000_000:
                continue
            verdict = "written" if events <= limit else "refused (hint: --per-rank-representatives)"
            rows.append(f"| `{name[:-5]}` | {steps} | {events / 1e6:.1f} M | {size} | {files:,} | "
                        f"{verdict} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


def cp_sweep(c):
    # docs/program.md, "Context parallel": Llama 3.1 8B at 131,072 tokens on 8 H100 (the bundled
    # cp 8 scenario) at cp 1, 2, 4, 8 under each exchange, one sample per data-parallel rank
    # (global batch 8 / cp); the CP exchange is the summary's "cp" group per GPU.
    scen = "scenarios/llama3_1_8b_8xh100_cp8_p2p.json"
    rows = ["| cp | cp_comm | step s | tokens/s per GPU | MFU | peak GiB | CP exchange ms per GPU "
            "(exposed) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    runs = [(1, "—", ())]
    for comm in ("p2p", "all_gather", "a2a", "a2a+p2p"):
        for cp in (2, 4, 8):
            if comm == "a2a+p2p" and cp < 4:
                continue  # a2a inside groups of 2 and a ring across them needs cp >= 4
            extra = ("strategy.cp_a2a=2",) if comm == "a2a+p2p" else ()
            runs.append((cp, comm, (f"strategy.cp_comm={comm}",) + extra))
    for cp, comm, sets in runs:
        d = c.summary(scen, f"strategy.cp={cp}", f"training.global_batch={8 // cp}", *sets)
        peak = max(g["peak_bytes"] for g in d["per_gpu"] if "peak_bytes" in g) / GIB
        if d.get("oom"):
            peak_cell = f"OOM ({d['oom']['would_be_peak_bytes'] / GIB:.1f} needed)"
        else:
            peak_cell = f"{peak:.1f}"
        cpg = [g for g in d.get("comm_by_group", []) if g["group"] == "cp"]
        n = d["gpus"]
        cp_cell = (f"{cpg[0]['comm_s'] / n * 1e3:.1f} ({cpg[0]['exposed_s'] / n * 1e3:.1f})"
                   if cpg else "—")
        rows.append(f"| {cp} | {comm} | {d['step_time_s']:.3f} | "
                    f"{d['transformer']['tokens_per_s_per_gpu']:.1f} | {100 * d['mfu']:.1f} % | "
                    f"{peak_cell} | {cp_cell} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


# [replay] simrun replay on the real PyTorch-profiler traces (docs/replay.md, "Fidelity"). They may
# not be committed: the folder is $CSIM_KINETO_FIXTURES or the build's CMake cache variable of that
# name; where it is absent these figures keep their text (None: left as is).
REPLAY_FIXTURES = [("sampled_rank-0 + sampled_rank-1", ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]),
                   ("diff_control", ["diff_control.json.gz"]), ("diff_test", ["diff_test.json.gz"]),
                   ("nccl_data", ["nccl_data.json.gz"]), ("df_index_resolver", ["df_index_resolver.json.gz"])]
REPLAY_STEP = re.compile(r"^\s+(\d+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+(-?[\d.]+) %$")
REPLAY_STAT = re.compile(r"^\s+(\w+)\s+(\d+)\s+(info|inferred|data loss|error)\s")
REPLAY_BUSY = re.compile(r"^\s+\d+\s+stream \S+\s+([\d.]+)\s+([\d.]+)$")
REPLAY_MEMORY = re.compile(r"^memory \(GiB\):\s+(\d+)\s+peak allocated\s+([\d.]+)\s+([\d.]+)$")


def kineto_dir(c):
    d = os.environ.get("CSIM_KINETO_FIXTURES")
    if not d:
        try:
            with open(os.path.join(c.build, "CMakeCache.txt")) as f:
                for line in f:
                    if line.startswith("CSIM_KINETO_FIXTURES:"):
                        d = line.split("=", 1)[1].strip()
        except OSError:
            d = None
    return d if d and os.path.isdir(d) else None


def replay_run(c, files, *sets):
    d = kineto_dir(c)
    if d is None or not all(os.path.exists(os.path.join(d, f)) for f in files):
        return None
    args = ["simrun", "replay"] + [os.path.join(d, f) for f in files]
    for s in sets:
        args += ["--set", s]
    out = c.run(args + ["--explain"])
    steps = [m.groups() for m in map(REPLAY_STEP.match, out.splitlines()) if m]
    stats = {m.group(1): int(m.group(2)) for m in map(REPLAY_STAT.match, out.splitlines()) if m}
    busy = [tuple(map(float, m.groups())) for m in map(REPLAY_BUSY.match, out.splitlines()) if m]
    memory = [tuple(map(float, m.groups()[1:])) for m in map(REPLAY_MEMORY.match, out.splitlines()) if m]
    gpu = re.search(r"trace[s]? on (\S+?)[ ,]", out).group(1)
    classes = re.search(r"GPU time by class \(measured -> what-if ms\):(.*)", out)
    coll = re.search(r"^collectives: (\d+) re-costed from .* to (\d+) ranks .*, (\d+) not re-costable",
                     out, re.M)
    return {"steps": steps, "stats": stats, "busy": busy, "gpu": gpu, "memory": memory,
            "classes": classes.group(1).strip() if classes else "",
            "recosted": int(coll.group(1)) if coll else 0, "ranks_to": int(coll.group(2)) if coll else 0,
            "fixed": int(coll.group(3)) if coll else 0}


def replay_fidelity(c):
    rows = ["| trace | GPU | steps | measured step (ms, mean) | replayed (ms, mean) | mean / max error "
            "| read: syncs, event waits | inferred: sync, last-launch / last-record sync, stream, occupancy, held, thread, launch order "
            "| collective waits, optimizer waits | collectives sized: read / inferred / not |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, files in REPLAY_FIXTURES:
        r = replay_run(c, files)
        if r is None:
            return None
        meas = [float(s[2]) for s in r["steps"]]
        rep = [float(s[3]) for s in r["steps"]]
        err = [abs(float(s[4])) for s in r["steps"]]
        st = r["stats"]
        cnt = lambda keys: ", ".join(str(st.get(k, 0)) for k in keys)
        rows.append(f"| {label} | {r['gpu']} | {len(meas)} | {sum(meas) / len(meas):.3f} | "
                    f"{sum(rep) / len(rep):.3f} | {sum(err) / len(err):.2f} % / {max(err):.2f} % | "
                    f"{cnt(('sync_reads', 'event_waits'))} | "
                    f"{cnt(('sync_waits',))}, {st.get('sync_last_launch', 0)} / {st.get('sync_last_record', 0)}, "
                    f"{cnt(('stream_edges', 'occupancy_edges', 'unexplained_waits', 'thread_edges', 'launch_order_waits'))} | "
                    f"{cnt(('collective_waits', 'optimizer_waits'))} | {st.get('collectives_sized', 0)} / "
                    f"{st.get('collectives_size_inferred', 0)} / {st.get('collectives_unsized', 0)} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


# The step under the collective what-ifs: 2x data-parallel ranks, and the job's ranks one a node
# over 10 Gb/s NICs (every collective crosses the network).
REPLAY_SLOW_NET = ("cluster.gpus_per_node=1", "cluster.nic_gbps=10")


def replay_exposed(c):
    rows = ["| trace | step (ms, mean) | 2x data-parallel (replay.dp_scale=2) | collective GPU ms at 2x "
            "| one rank a node, 10 Gb/s NICs | collective GPU ms there | collectives re-costed / not |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    mean = lambda r: sum(float(s[3]) for s in r["steps"]) / len(r["steps"])
    coll = lambda r: next((m.group(1) + " -> " + m.group(2) for m in
                           [re.search(r"collective ([\d.]+) -> ([\d.]+)", r["classes"])] if m), "—")
    for label, files in REPLAY_FIXTURES:
        own = replay_run(c, files)
        dp = replay_run(c, files, "replay.dp_scale=2")
        net = replay_run(c, files, *REPLAY_SLOW_NET)
        if own is None or dp is None or net is None:
            return None
        a, d, n = mean(own), mean(dp), mean(net)
        rows.append(f"| {label} | {a:.3f} | {d:.3f} ({100 * (d - a) / a:+.2f} %) | {coll(dp)} | "
                    f"{n:.3f} ({100 * (n - a) / a:+.2f} %) | {coll(net)} | "
                    f"{net['recosted']} / {net['fixed']} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


def replay_memory(c):
    rows = ["| trace | [memory] events replayed | measured peak allocated (GiB) | replayed peak (GiB) |",
            "| --- | --- | --- | --- |"]
    for label, files in REPLAY_FIXTURES:
        r = replay_run(c, files)
        if r is None:
            return None
        for meas, rep in r["memory"]:
            rows.append(f"| {label} | {r['stats'].get('memory_replayed', 0)} | {meas:.3f} | {rep:.3f} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


def replay_h100(c):
    rows = ["| trace | own GPU | step (ms, mean) | on H100-SXM5-80GB | the same, unexplained waits released "
            "| GPU busy (ms) | GPU time by class on H100 (measured -> what-if ms) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for label, files in REPLAY_FIXTURES:
        own = replay_run(c, files)
        h = replay_run(c, files, "cluster.gpu=H100-SXM5-80GB")
        free = replay_run(c, files, "cluster.gpu=H100-SXM5-80GB", "replay.hold_unexplained=false")
        if own is None or h is None or free is None:
            return None
        f = sum(float(s[3]) for s in free["steps"]) / len(free["steps"])
        a = sum(float(s[3]) for s in own["steps"]) / len(own["steps"])
        b = sum(float(s[3]) for s in h["steps"]) / len(h["steps"])
        ba, bb = sum(x[1] for x in own["busy"]), sum(x[1] for x in h["busy"])
        rows.append(f"| {label} | {own['gpu']} | {a:.3f} | {b:.3f} ({100 * (b - a) / a:+.1f} %) | "
                    f"{f:.3f} ({100 * (f - a) / a:+.1f} %) | {ba:.1f} -> {bb:.1f} | {h['classes']} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


def replay_class_moves(after):
    """The classes whose GPU time a what-if moved, from its 'GPU time by class' text."""
    pairs = lambda t: {m.group(1): (float(m.group(2)), float(m.group(3)))
                       for m in re.finditer(r"([a-z -]+?) ([\d.]+) -> ([\d.]+)", t)}
    moved = [f"{k.strip()} {v[0]:.1f} -> {v[1]:.1f}" for k, v in pairs(after).items()
             if abs(v[1] - v[0]) >= 0.05]
    return ", ".join(moved) if moved else "none"


def replay_whatif(c):
    rows = ["| trace | own GPU | step (ms, mean) | on H100-SXM5-80GB | classes moved on H100 (GPU ms) "
            "| 2x data-parallel (replay.dp_scale=2) | ranks | collectives re-costed / not re-costable "
            "| classes moved at 2x (GPU ms) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    mean = lambda r: sum(float(s[3]) for s in r["steps"]) / len(r["steps"])
    for label, files in REPLAY_FIXTURES:
        own = replay_run(c, files)
        h = replay_run(c, files, "cluster.gpu=H100-SXM5-80GB")
        dp = replay_run(c, files, "replay.dp_scale=2")
        if own is None or h is None or dp is None:
            return None
        a, b, d = mean(own), mean(h), mean(dp)
        rows.append(f"| {label} | {own['gpu']} | {a:.3f} | {b:.3f} ({100 * (b - a) / a:+.2f} %) | "
                    f"{replay_class_moves(h['classes'])} | "
                    f"{d:.3f} ({100 * (d - a) / a:+.2f} %) | {dp['ranks_to'] // 2} -> {dp['ranks_to']} | "
                    f"{dp['recosted']} / {dp['fixed']} | {replay_class_moves(dp['classes'])} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


def replay_example(c):
    """README's bundled example: traces/replay_example (simrun --per-rank of a 2-GPU DDP run)."""
    base = ["simrun", "replay", "traces/replay_example", "--set", "replay.source_gpu=GTX-1080-Ti"]
    own, h = c.run(base), c.run(base + ["--set", "cluster.gpu=H100-SXM5-80GB"])
    mean = lambda out: (lambda v: sum(v) / len(v))(
        [float(m.group(4)) for m in map(REPLAY_STEP.match, out.splitlines()) if m])
    meas = (lambda v: sum(v) / len(v))(
        [float(m.group(3)) for m in map(REPLAY_STEP.match, own.splitlines()) if m])
    stats = {m.group(1): int(m.group(2)) for m in map(REPLAY_STAT.match, own.splitlines()) if m}
    return (f"{meas * 1e3:.0f} µs a step measured, {mean(own) * 1e3:.0f} µs replayed, "
            f"{mean(h) * 1e3:.0f} µs on an H100; {stats.get('event_waits', 0)} stream waits read from "
            f"its cuda_sync records")


def replay_readme(c):
    files = ["nccl_data.json.gz"]
    own, h = replay_run(c, files), replay_run(c, files, "cluster.gpu=H100-SXM5-80GB")
    if own is None or h is None:
        return None
    n = len(own["steps"])
    meas = sum(float(x[2]) for x in own["steps"]) / n
    rep = sum(float(x[3]) for x in own["steps"]) / n
    hs = sum(float(x[3]) for x in h["steps"]) / n
    return (f"{meas:.3f} ms measured, {rep:.3f} ms replayed (mean of {n} steps); on an H100 the "
            f"GPU's busy time falls from {sum(b[1] for b in own['busy']):.1f} to "
            f"{sum(b[1] for b in h['busy']):.1f} ms and the step is {hs:.3f} ms")


FIGURES = {
    "replay_readme": (replay_readme, False),
    "replay_example": (replay_example, False),
    "replay_fidelity": (replay_fidelity, False),
    "replay_exposed": (replay_exposed, False),
    "replay_memory": (replay_memory, False),
    "replay_h100": (replay_h100, False),
    "replay_whatif": (replay_whatif, False),
    "tracediff_output": (tracediff_output, False),
    "per_rank_sizes": (per_rank_sizes, False),
    "collective_sweep_dgx_a100": (lambda c: collective_sweep(c, "dgx_a100"), False),
    "collective_sweep_dgx_h100": (lambda c: collective_sweep(c, "dgx_h100"), False),
    "fp8_example": (fp8_example, False),
    "cp_sweep": (cp_sweep, False),
    "block_eval_accuracy": (block_eval_accuracy, False),
    "block_eval_speed": (block_eval_speed, True),
    "sweep_rate": (sweep_rate, True),
    "tune_time": (tune_time, True),
    "sweep_speed_table": (sweep_speed_table, True),
    "limits_measured": (limits_measured, "measured"),
    "bytes_per_event": (bytes_per_event, "measured"),
    "bad_input_tally": (bad_input_tally, False),
    "hpo_example": (hpo_example, False),
    "gil_variants": (gil_variants, False),
    "moe_routing_pair": (moe_routing_pair, False),
    "moe_dispatchers": (moe_dispatchers, False),
    "dualpipev": (dualpipev, False),
    "steady_state_example": (steady_state_example, False),
    "korthikanti_fig1_memory": (korthikanti_fig1_memory, False),
    "fsdp2_reserved": (fsdp2_reserved, False),
    "backpressure_zero3": (backpressure_zero3, False),
    "ci_table": (ci_table, False),
    "accuracy_table": (accuracy_table, False),
    "accuracy_cases": (accuracy_cases, False),
    "dp_memory": (dp_memory, False),
    "python_example_source": (python_example_source, False),
    "python_example_output": (python_example_output, False),
    "python_overhead": (python_overhead, True),
    "ddp_step": (ddp_step, False),
    "dp_step": (dp_step, False),
    "ci_diff": (ci_diff, False),
}


# A measured figure's memory (peak RSS in KiB) may move this much, relative, between runs and
# machines before --check calls it stale: RSS of one binary on one input varies by a few percent
# with the allocator and the kernel; a figure off by more has drifted (issue 31: a doc quoted
# 225,088 KiB for `simrun --help`, which measured 5,152 KiB).
MEASURED_TOLERANCE = 0.25
KIB = re.compile(r"([\d,]+) KiB")


def memory_moved(old, new):
    """None when every KiB figure of NEW is within MEASURED_TOLERANCE of OLD's, else why."""
    a = [int(x.replace(",", "")) for x in KIB.findall(old)]
    b = [int(x.replace(",", "")) for x in KIB.findall(new)]
    if len(a) != len(b):
        return f"{len(a)} memory figures, now {len(b)}"
    for x, y in zip(a, b):
        if abs(y - x) > MEASURED_TOLERANCE * max(x, 1):
            return f"{x:,} KiB is now {y:,} KiB (more than {MEASURED_TOLERANCE:.0%} off)"
    return None


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
    ap.add_argument("--only", default="",
                    help="comma-separated figure names: refresh these, leave the others as they are")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    stale, used, errors = [], set(), []
    with tempfile.TemporaryDirectory(prefix="csim_docs_") as tmp:
        c = Ctx(os.path.abspath(a.build_dir), tmp)
        c.check = a.check
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
                fn, kind = FIGURES[name]
                if only and name not in only:
                    return m.group(0)
                if kind is True and not a.timed:
                    return m.group(0)
                new = value(name)
                if new is None:  # its input is absent here (the Kineto fixtures): left as is
                    return m.group(0)
                if kind == "measured" and not a.timed:
                    # Memory is checked within MEASURED_TOLERANCE; times are not checked, and
                    # the text is rewritten only with --timed or when memory moved.
                    why = memory_moved(old, new)
                    if not why:
                        return m.group(0)
                    stale.append(f"{rel}: fig:{name}: {why}")
                    return f"<!-- fig:{name} -->{new}<!-- /fig -->"
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
