// docs/sweep.md, "Tune", "Bounds": the chunk passes a stage holds in its backward phase.
#include "sweep/in_flight.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace csim::sweep {

std::vector<int> held_chunk_passes(core::PipelineSchedule schedule, int stages, int chunks,
                                   int micro, int stage) {
  CSIM_ASSERT(stages >= 1 && chunks >= 1 && micro >= 1 && stage >= 0 && stage < stages);
  const int p = stages, s = stage, m = micro;
  std::vector<int> n(static_cast<std::size_t>(chunks), 0);
  switch (schedule) {
    case core::PipelineSchedule::kGpipe:
      // core::pipeline_schedule: every forward, then every backward.
      n[0] = m;
      return n;
    case core::PipelineSchedule::k1f1b:
      // core::pipeline_schedule (Megatron's forward_backward_pipelining_without_interleaving):
      // min(p - s - 1, m) warm-up forwards, then the steady phase's forward before its first
      // backward.
      n[0] = std::min(p - s, m);
      return n;
    case core::PipelineSchedule::kDualPipeV: {
      // core::dualpipev_schedule (dualpipe/dualpipev.py, DualPipeV.step()) on rank s: phases 1-2
      // run 2(p - s - 1) + (s + 1) = 2p - s - 1 chunk-0 and s + 1 chunk-1 forwards; phase 3's
      // (B1, F1) rounds free one chunk-1 pass and add one; phase 4's first F0&B1 (on the last
      // rank its unpaired F0, then B1) adds a chunk-0 pass before its backward closes. Phase 4
      // has m - 2p + s + 1 >= 1 rounds (m >= 2p); its first backward is the stage's first on the
      // last rank and comes after phase 3's on the others, so the gradients exist.
      CSIM_ASSERT(chunks == 2);
      n[0] = 2 * p - s;
      n[1] = s + 1;
      return n;
    }
    case core::PipelineSchedule::kInterleaved: {
      // core::pipeline_schedule, as Megatron-Core's get_pp_rank_microbatches
      // (megatron/core/pipeline_parallel/schedules.py) with microbatch_group_size_per_vp_stage
      // = p: w = 2 (p - s - 1) + (v - 1) p warm-up forwards, every one of them when m = p (the
      // lowering's all-warm-up case), at most m v; then the steady phase's forward before the
      // first backward. Forward k runs chunk (k mod p v) / p: whole groups of p v forwards hold
      // p passes of each chunk, the rest fills chunks in order, p each.
      const int total = m * chunks, group = p * chunks;
      int warm = 2 * (p - s - 1) + (chunks - 1) * p;
      if (m == p) warm = total;
      warm = std::min(warm, total);
      const int held = std::min(warm + 1, total);
      for (int c = 0; c < chunks; ++c)
        n[static_cast<std::size_t>(c)] =
            held / group * p + std::min(p, std::max(0, held % group - c * p));
      return n;
    }
  }
  CSIM_ASSERT(false);
  return n;
}

}  // namespace csim::sweep
