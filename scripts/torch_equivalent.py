#!/usr/bin/env python3
"""The PyTorch equivalent of a single-GPU ClusterSim scenario, profiled with torch.profiler.

    python3 scripts/torch_equivalent.py scenarios/gpt2_small_1xh200.json --out run.torch.json

Builds the scenario's model as PyTorch would run it (model.gpt: a GPT-2 with the same shapes
and the same unfused attention the simulator models -- scores, softmax, dropout, A.V; or
model.layers made of linear layers), trains it for training.steps steps with the scenario's
batch, precision and optimizer, writes the Kineto trace of the steps after two warm-ups
(ProfilerStep#N markers, which ClusterSim's trace reader and tracediff understand), and prints
the median step time measured with CUDA events. The trace is the ground truth that ClusterSim's
own proxy kernels cannot give: docs/real-execution.md, "GPU check".
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads, ffn, p_drop):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln_2 = nn.LayerNorm(h)
        self.fc = nn.Linear(h, ffn)
        self.fc_proj = nn.Linear(ffn, h)
        self.drop = nn.Dropout(p_drop)

    def attention(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=2)
        shape = (b, s, self.heads, h // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        # Unfused, as the simulator's attn.scores / softmax / dropout / av.
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.heads)
        mask = torch.ones(s, s, device=x.device, dtype=torch.bool).tril()
        probs = self.drop(F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1))
        return self.proj((probs @ v).transpose(1, 2).reshape(b, s, h))

    def forward(self, x):
        x = x + self.drop(self.attention(self.ln_1(x)))
        return x + self.drop(self.fc_proj(F.gelu(self.fc(self.ln_2(x)))))


class Gpt(nn.Module):
    def __init__(self, g):
        super().__init__()
        h, v, s = g["hidden"], g["vocab"], g["seq_len"]
        ffn = g.get("ffn_hidden", 0) or 4 * h
        self.wte = nn.Embedding(v, h)
        self.wpe = nn.Embedding(s, h)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList(Block(h, g["heads"], ffn, 0.1) for _ in range(g["layers"]))
        self.ln_f = nn.LayerNorm(h)
        self.lm_head = nn.Linear(h, v, bias=False)
        if g.get("tied_embeddings", True):
            self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def build(scenario):
    m = scenario["model"]
    if "gpt" in m:
        g = m["gpt"]
        model = Gpt(g)

        def batch(n, dev):
            ids = torch.randint(0, g["vocab"], (n, g["seq_len"]), device="cpu")
            return ids, ids

        def loss_fn(out, tgt):
            return F.cross_entropy(out.view(-1, out.shape[-1]), tgt.to(out.device).view(-1))

        return model, batch, loss_fn
    if "layers" in m:
        layers = []
        for l in m["layers"]:
            if l["type"] != "linear":
                sys.exit(f"torch_equivalent: layer type {l['type']} is not supported")
            layers.append(nn.Linear(l["in"], l["out"], bias=l.get("bias", True)))
        model = nn.Sequential(*layers)
        width = m["layers"][0]["in"]

        def batch(n, dev):
            return torch.randn(n, width), None

        def loss_fn(out, tgt):
            return out.float().pow(2).mean()

        return model, batch, loss_fn
    sys.exit("torch_equivalent: only model.gpt and model.layers (linear) are supported")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--out", required=True, help="Kineto trace to write")
    a = ap.parse_args()
    sc = json.load(open(a.scenario))
    if sc.get("strategy", {}).get("kind", "single") != "single":
        sys.exit("torch_equivalent: single-GPU scenarios only")
    tr = sc["training"]
    steps = max(3, int(tr.get("steps", 5)))
    n = int(tr["global_batch"])
    prec = tr.get("precision", "fp32")
    amp = prec == "amp"
    amp_dtype = torch.bfloat16 if tr.get("amp_dtype", "bf16") == "bf16" else torch.float16
    dev = torch.device("cuda")
    model, batch, loss_fn = build(sc)
    if prec in ("bf16", "fp16"):
        model = model.to(torch.bfloat16 if prec == "bf16" else torch.float16)
    model = model.to(dev)
    opt = (torch.optim.Adam if tr.get("optimizer", "adam") == "adam" else torch.optim.SGD)(
        model.parameters(), lr=1e-4)
    pin = tr.get("data_loader", {}).get("pin_memory", False)

    def step():
        x, y = batch(n, dev)
        if pin:
            x = x.pin_memory()
        x = x.to(dev, non_blocking=pin)
        if prec in ("bf16", "fp16") and x.is_floating_point():
            x = x.to(next(model.parameters()).dtype)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
            loss = loss_fn(model(x), y if y is not None else None)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    times = []
    sched = torch.profiler.schedule(wait=0, warmup=2, active=steps - 2)
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            schedule=sched, record_shapes=True,
            on_trace_ready=lambda p: p.export_chrome_trace(a.out)) as prof:
        for i in range(steps):
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            step()
            t1.record()
            torch.cuda.synchronize()
            if i >= 2:
                times.append(t0.elapsed_time(t1))
            prof.step()
    print(f"median step {statistics.median(times):.3f} ms over {len(times)} steps "
          f"({torch.cuda.get_device_name()}, torch {torch.__version__}); trace {a.out}")


if __name__ == "__main__":
    main()
