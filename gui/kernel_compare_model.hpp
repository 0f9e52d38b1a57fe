// Per-GPU comparison of the GPU work whose name matches a filter (docs/simview.md, "Compare"):
// how long each GPU spends in, say, the expert GEMMs of a mixture of experts ("mlp.experts") or
// in the expert-parallel all-to-alls ("ep all_to_all"), and, for every instance of such a kernel
// that several GPUs run (same name, same process group, k-th occurrence), which GPU took longest.
// Under balanced routing every EP rank's expert kernels take the same time; under a skewed one
// the busiest rank's take longer and the others' all-to-alls wait for it. Plain C++, tested
// headless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/summary.hpp"
#include "profiler/trace.hpp"

namespace csim::gui {

// `filter` is one or more substrings separated by '|' (blanks around them ignored); a GPU-work
// event (compute, communication, copy) matches when its name or its "op" arg (the Program op a
// collective kernel runs: "ep all_to_all dispatch") contains one of them. An empty filter
// matches nothing.
bool kernel_matches(const prof::TraceEvent& e, std::string_view filter);

struct GpuKernelTime {
  std::int32_t pid = 0;
  std::string name;       // "node 0 / GPU 3"
  double per_step_s = 0;  // Σ durations of its matching events / steps of the trace
  std::size_t events = 0;
  int slowest = 0;  // instances (below) in which this GPU took strictly longest
};

struct KernelComparison {
  std::string filter;
  std::vector<GpuKernelTime> gpus;          // GPUs with at least one matching event, by pid
  double max_s = 0, mean_s = 0, min_s = 0;  // over `gpus`, per step
  // Instances: a matching event's key is its name (plus its "op" arg and its process group
  // "Process Group Name" when it has them) and its occurrence k on its GPU; an instance is a key
  // found on two or more GPUs (the same kernel of the same layer and micro-batch on every rank
  // of a group).
  int instances = 0;
  int equal_instances = 0;    // whose slowest and fastest GPU differ by at most 0.1 %
  double mean_spread = 1;     // mean over instances of max / min duration (1: all equal)
  double worst_spread = 1;    // the largest max / min
  int symmetric_mirrors = 0;  // rank symmetry: GPUs the trace has no events for (summary)
};

// Matching GPU work of `trace` per GPU; `summary` gives the steps (per-step figures divide by
// their count, at least 1) and the GPUs rank symmetry left out.
KernelComparison compare_kernels(const prof::Trace& trace, const prof::Summary& summary,
                                 std::string_view filter);

// max / mean of the GPUs' per-step time (1 when they are equal, 0 without GPUs).
double max_over_mean(const KernelComparison& k);

// The GPU that was slowest in the most instances (the first of equals); -1 when none was.
int most_often_slowest(const KernelComparison& k);

}  // namespace csim::gui
