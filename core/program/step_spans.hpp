// Training steps in time (docs/summary.md, "Steps"): per GPU, the span of each step from the GPU's
// training loop reaching the step's first op to the end of the step's last op on that GPU. The
// trace builder writes them as ProfilerStep#N; sweeps read the step time from them directly,
// without building a trace.
#pragma once

#include <vector>

#include "core/program/executor.hpp"
#include "core/program/program.hpp"

namespace csim::core {

struct StepSpan {
  int gpu = 0;
  int step = 0;  // 1-based
  TimeNs start_ns = 0, end_ns = 0;
};

// Sorted by (gpu, step). A GPU's loop thread is its first host thread; other threads' early
// starts (data-loader workers prefetching later batches) do not move a step's start, only its end.
// A GPU whose loop thread issued nothing in a step starts it at its first op on a stream.
// A GPU's steps do not overlap: each starts at the earliest at the previous one's end.
// `count`, when given, counts the ops read (docs/limits.md, "Progress": "summarising").
std::vector<StepSpan> step_spans(const Program& p, const std::vector<OpTiming>& timing,
                                 ProgressCount* count = nullptr);

// The first host thread of each GPU (-1 for GPUs without one), indexed by GPU.
std::vector<int> loop_thread_of_gpu(const Program& p);

// The step time as the summary computes it from the ProfilerStep#N spans (docs/summary.md,
// "Steps"): steps merged over GPUs (earliest start, latest end); each step after the first lasts
// from the previous step's end; the median of steps 2..N, or step 1 alone when N == 1. 0 when no
// step ran.
double step_time_s(const std::vector<StepSpan>& spans);

}  // namespace csim::core
