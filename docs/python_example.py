"""DataParallel or DDP on the notes' 4-GPU server (scenarios/dp_vs_ddp_4x1080ti.json), a batch
sweep plotted, and the per-GPU memory imbalance: docs/python.md's example, run by the test
python:test_docs_example and by scripts/refresh-docs.py, which writes its output and plots into
the docs.

usage: PYTHONPATH=build/release/python /usr/bin/python3 docs/python_example.py [IMAGES_DIR]
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import clustersim as cs

images = sys.argv[1] if len(sys.argv) > 1 else "docs/images"
GIB = 1024**3

# 1. DataParallel or DDP? The same server, model and batch; only strategy.kind differs.
runs = {kind: cs.simulate(cs.load("scenarios/dp_vs_ddp_4x1080ti.json",
                                  set={"strategy.kind": kind}))
        for kind in ("data_parallel", "ddp")}
label = {"data_parallel": "DataParallel", "ddp": "DDP"}
for kind, r in runs.items():
    peaks = r.per_gpu["peak_bytes"] / GIB
    print(f"{label[kind]:>12}: step {r.step_time_s * 1e3:6.1f} ms  {r.samples_per_s:6.0f} samples/s  "
          f"peak {peaks.max():5.2f} GiB  imbalance {r.imbalance:.2f}  oom {r.oom}")
print(f"DDP is {runs['data_parallel'].step_time_s / runs['ddp'].step_time_s:.2f}x faster per step")

# 2. How far does the batch go? A sweep of the global batch under DDP, as a DataFrame.
sc = cs.load("scenarios/dp_vs_ddp_4x1080ti.json", set={"strategy.kind": "ddp"})
df = cs.sweep(sc, grid={"training.global_batch": [32, 64, 128, 256, 384, 512]}, jobs=2,
              sort="index")
print(df[["training.global_batch", "status", "samples_per_s", "peak_gib"]]
      .to_string(index=False))

fig, ax = plt.subplots(figsize=(6, 3.5))
ok = df[df.status == "ok"]
ax.plot(ok["training.global_batch"], ok["samples_per_s"], "o-", color="tab:blue")
ax.set_xlabel("global batch (samples)")
ax.set_ylabel("samples/s", color="tab:blue")
mem = ax.twinx()
mem.plot(df["training.global_batch"], df["peak_gib"], "s--", color="tab:red")
mem.axhline(df["usable_gib"].iloc[0], color="tab:red", linewidth=0.8, linestyle=":")
mem.set_ylabel("peak memory (GiB; dotted: usable)", color="tab:red")
ax.set_title("DDP on 4x GTX 1080 Ti: throughput and peak memory against batch")
fig.tight_layout()
fig.savefig(os.path.join(images, "python_batch_sweep.png"), dpi=90, metadata={"Software": None})

# 3. Where does DataParallel put its memory? Peak per GPU, both strategies side by side.
fig, ax = plt.subplots(figsize=(6, 3.6))
width = 0.4
for i, (kind, r) in enumerate(runs.items()):
    g = r.per_gpu
    ax.bar(g["gpu"] + (i - 0.5) * width, g["peak_bytes"] / GIB, width,
           label=f"{label[kind]} (imbalance {r.imbalance:.2f})")
ax.set_xlabel("GPU")
ax.set_ylabel("peak memory (GiB)")
ax.set_xticks(runs["data_parallel"].per_gpu["gpu"])
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
ax.set_title("Per-GPU peak memory: DataParallel gathers on GPU 0")
fig.tight_layout()
fig.savefig(os.path.join(images, "python_memory_imbalance.png"), dpi=90,
            metadata={"Software": None})
