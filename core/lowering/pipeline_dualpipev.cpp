// DualPipeV, DeepSeek's "cut-in-half" DualPipe (strategy.schedule dualpipev; docs/program.md,
// "DualPipeV"). Source: deepseek-ai/DualPipe, dualpipe/dualpipev.py, DualPipeV.step(); the
// bidirectional DualPipe it is cut from is the DeepSeek-V3 technical report's section 3.2.1.
//
// p ranks hold 2p model chunks in a V: rank r runs chunk 0 = segment r (the descending arm,
// "phase 0" in dualpipev.py) and chunk 1 = segment 2p - 1 - r (the returning arm, "phase 1"), so
// rank 0 holds the embedding and the LM head with the loss, and rank p - 1 the two middle
// segments, whose hand-over is local (dualpipev.py: on the last rank phase 0's output becomes
// phase 1's input by detach().requires_grad_(), no send). step() on rank r, m >= 2p micro-batches
// (its assert num_chunks >= num_ranks * 2), F0/F1 a forward of chunk 0/1, B0/B1 a backward,
// F&B one _forward_backward_chunk call:
//   1  2 (p - r - 1) x F0
//   2  (r + 1)       x F0, F1
//   3  (p - r - 1)   x B1, F1          (B1 input-grad only, its W right after: zero bubble)
//   4  (m - 2p + r + 1) x F0&B1, F1&B0 (the first F0&B1 on the last rank runs unpaired)
//   5  (p - r - 1)   x B1, F1&B0
//   6  (r + 1)       x B1, B0          (the second half with W deferred)
//   7  (p - r - 1)   x B0              (each after one deferred W)
//   8  the remaining deferred W
// Every chunk's forwards and backwards run in micro-batch order (each phase keeps its own
// counter: current_f_chunk_id, current_b_chunk_id), so each step is (chunk, next micro-batch
// of that chunk and direction). Counts: F0 2(p-r-1) + (r+1) + (m-2p+r+1) = m; F1 (r+1) +
// (p-r-1) + (m-2p+r+1) + (p-r-1) = m; B1 and B0 likewise m.
//
// The W passes (backward for weights, WeightGradStore) are not separate here: a backward is one
// pass with its weight gradients (docs/program.md says what the split would save).
#include <algorithm>

#include "core/error.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

std::vector<DualPipeStep> dualpipev_schedule(int stages, int micro, int stage) {
  CSIM_ASSERT(stages >= 2 && micro >= 2 * stages && stage >= 0 && stage < stages);
  const int p = stages, r = stage, m = micro;
  const bool last_rank = r == p - 1;
  int f[2] = {0, 0}, b[2] = {0, 0};  // next micro-batch per chunk: forward, backward
  std::vector<DualPipeStep> out;
  auto fwd = [&](int c) { return PipeStep{true, c, f[c]++}; };
  auto bwd = [&](int c) { return PipeStep{false, c, b[c]++}; };
  auto alone = [&](PipeStep s) { out.push_back({s, {}, false}); };
  auto pair = [&](int cf, int cb) {
    const PipeStep sf = fwd(cf);
    out.push_back({sf, bwd(cb), true});
  };
  for (int i = 0; i < 2 * (p - r - 1); ++i) alone(fwd(0));  // 1: nF0
  for (int i = 0; i < r + 1; ++i) {                         // 2: nF0F1
    alone(fwd(0));
    alone(fwd(1));
  }
  for (int i = 0; i < p - r - 1; ++i) {  // 3: nB1W1F1
    alone(bwd(1));
    alone(fwd(1));
  }
  for (int i = 0; i < m - 2 * p + r + 1; ++i) {  // 4: nF0B1F1B0
    if (i == 0 && last_rank) {
      // "We don't overlap these two chunks to further reduce bubble size."
      alone(fwd(0));
      alone(bwd(1));
    } else {
      pair(0, 1);
    }
    pair(1, 0);
  }
  for (int i = 0; i < p - r - 1; ++i) {  // 5: nB1F1B0
    alone(bwd(1));
    pair(1, 0);
  }
  for (int i = 0; i < r + 1; ++i) {  // 6: nB1B0
    alone(bwd(1));
    alone(bwd(0));
  }
  for (int i = 0; i < p - r - 1; ++i) alone(bwd(0));  // 7: nWB0
  CSIM_ASSERT(f[0] == m && f[1] == m && b[0] == m && b[1] == m);
  return out;
}

int pipeline_stage_of_segment(const ParallelSpec& ps, int seg) {
  if (ps.schedule != PipelineSchedule::kDualPipeV) return seg % ps.pp;
  return seg < ps.pp ? seg : 2 * ps.pp - 1 - seg;
}

int pipeline_chunk_of_segment(const ParallelSpec& ps, int seg) {
  if (ps.schedule != PipelineSchedule::kDualPipeV) return seg / ps.pp;
  return seg < ps.pp ? 0 : 1;
}

int pipeline_segment(const ParallelSpec& ps, int chunk, int stage) {
  if (ps.schedule != PipelineSchedule::kDualPipeV) return chunk * ps.pp + stage;
  return chunk == 0 ? stage : 2 * ps.pp - 1 - stage;
}

}  // namespace csim::core
