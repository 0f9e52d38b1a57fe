// The EP all-to-all overlap of Megatron-Core's combined 1F1B schedule (strategy.moe_a2a_overlap
// 1f1b; docs/program.md, "MoE all-to-all overlap"). Internal to core/lowering.
#pragma once

#include <vector>

#include "core/lowering/parallel_plan.hpp"

namespace csim::core::hybrid {

// One entry of a stage's overlapped schedule: a pass alone (warm-up, cool-down) or a forward and
// another micro-batch's backward merged layer by layer (`paired`, the steady phase).
struct OverlapStep {
  PipeStep a;  // the pass alone, or the pair's forward
  PipeStep b;  // the pair's backward (paired only)
  bool paired = false;
};

// pipeline_schedule's order for the stage with a longer warm-up (interleaved: one more forward,
// as Megatron-Core's schedules.py under overlap_moe_expert_parallel_comm; 1F1B: 2 (p - s - 1) + 1;
// pp 1: one, combined_1f1b.py's combined_1f1b_schedule_for_no_pipelining), then the steady
// phase's forward i + w' paired with backward i, then the remaining backwards alone. A pair's
// two micro-batches never depend on each other. The stage holds the warm-up's micro-batches'
// activations in flight (moe_a2a_overlap.cpp says why 1F1B needs 2 (p - s - 1) + 1).
std::vector<OverlapStep> overlap_schedule(PipelineSchedule schedule, int stages, int chunks,
                                          int micro, int stage);

// The layers where a merged pass pauses for the other in segment [first, end): each MoE
// block's first expert layer (before its dispatch) and the layer after its last (after its
// combine), ascending, inside (first, end).
std::vector<int> overlap_boundaries(const ModelSpec& m, int first, int end);

}  // namespace csim::core::hybrid
