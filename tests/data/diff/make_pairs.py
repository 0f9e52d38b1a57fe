#!/usr/bin/env python3
"""Writes the small trace pairs tests/test_trace_diff.cpp diffs (Kineto-style Chrome traces, µs).

Per step k (period P µs, start s = (k-1)·P) and GPU g: ProfilerStep#k on the host thread, a cpu_op
with a nested cudaLaunchKernel, an ac2g flow launch → GEMM, a GEMM on stream 7, an NCCL all-reduce
on stream 13, an H2D copy on stream 20, and memory counters. Values are chosen so the expected
metrics can be stated in the tests: see the comments there. Run from this folder to regenerate.
"""
import json

GIB = 1024 ** 3


def trace(gpus=2, period=10000, gemm=(500, 6500), comm=(5500, 7500), copy=(100, 600),
          extra_comm=None, peaks=(1.5 * GIB, 1.25 * GIB), steps=3):
    ev = []
    for g in range(gpus):
        ev.append({"ph": "M", "name": "process_name", "pid": g, "tid": 0, "args": {"name": f"GPU {g}"}})
        for k in range(1, steps + 1):
            s = (k - 1) * period
            host = 100 + g
            ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": g,
                       "tid": host, "ts": s, "dur": period})
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": g, "tid": host,
                       "ts": s, "dur": 500})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": g,
                       "tid": host, "ts": s + 400, "dur": 10, "args": {"correlation": k * 10 + g}})
            ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": k * 10 + g, "pid": g,
                       "tid": host, "ts": s + 400})
            ev.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": k * 10 + g, "pid": g, "tid": 7,
                       "ts": s + gemm[0], "bp": "e"})
            ev.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": g, "tid": 7,
                       "ts": s + gemm[0], "dur": gemm[1] - gemm[0], "args": {"correlation": k * 10 + g}})
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                       "pid": g, "tid": 13, "ts": s + comm[0], "dur": comm[1] - comm[0]})
            if extra_comm:
                ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL",
                           "pid": g, "tid": 13, "ts": s + extra_comm[0],
                           "dur": extra_comm[1] - extra_comm[0]})
            if copy:
                ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)",
                           "pid": g, "tid": 20, "ts": s + copy[0], "dur": copy[1] - copy[0]})
            ev.append({"ph": "C", "name": "memory", "pid": g, "ts": s + 500,
                       "args": {"allocated": GIB}})
            ev.append({"ph": "C", "name": "memory", "pid": g, "ts": s + 7000,
                       "args": {"allocated": int(peaks[g])}})
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": gpus},
            "traceEvents": ev}


def write(name, t):
    with open(name, "w") as f:
        json.dump(t, f, indent=None, separators=(",", ":"))
        f.write("\n")


write("base.json", trace())
# comm no longer overlapped (3 ms after the GEMM) and the step 10 % longer
write("regression.json", trace(period=11000, comm=(6500, 9500)))
# GEMM 1 ms shorter, all-reduce moved with it, step 10 % shorter
write("improvement.json", trace(period=9000, gemm=(500, 5500), comm=(4500, 6500)))
# the H2D copy vanished, an all-gather appeared
write("op_changed.json", trace(copy=None, extra_comm=(8000, 8500)))
# one GPU instead of two
write("one_gpu.json", trace(gpus=1))
text = json.dumps(trace())
with open("truncated.json", "w") as f:
    f.write(text[: len(text) // 2])
with open("not_json.json", "w") as f:
    f.write("this is not a trace\n")
with open("no_events.json", "w") as f:
    f.write('{"traceEvents": 5}\n')
