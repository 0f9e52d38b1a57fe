// Op classes: the grouping of trace events that tracediff compares per (GPU, lane role, op class),
// the same for our traces and PyTorch-profiler (Kineto) traces. Rules: docs/tracediff.md "Op
// classes".
#pragma once

#include <string_view>

#include "profiler/trace.hpp"

namespace csim::prof {

// The op class of an event, e.g. "gemm", "all_reduce", "memcpy_h2d", "cpu_op"; "" for events that
// are not timed work (annotations such as ProfilerStep#N, class other).
//  - compute kernels: our "kind" arg (gemm, elementwise, conv, attention, ...), else by name:
//    conv, attention, gemm, norm, reduction, optimizer, elementwise, else other_kernel;
//  - communication: our / Kineto's "Collective name" arg, else by name: all_reduce, all_gather,
//    reduce_scatter, all_to_all, broadcast, reduce, send_recv, else comm_other;
//  - copies: our "copy_kind" arg, else Kineto's name: memcpy_h2d, memcpy_d2h, memcpy_d2d,
//    memcpy_p2p, memset, else memcpy_other;
//  - host: by category: cpu_op, cuda_runtime, python, else host_other; GIL waits: gil_wait.
std::string_view op_class(const TraceEvent& e);

}  // namespace csim::prof
