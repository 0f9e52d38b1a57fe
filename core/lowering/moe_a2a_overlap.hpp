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

// pipeline_schedule's order for the stage with one more warm-up forward, the steady phase's
// forward i + warm' paired with backward i. Megatron-Core adds that forward so that a pair's two
// micro-batches never depend on each other (on the last stage the base 1F1B pairs F(i) with
// B(i)): schedules.py's interleaved warm-up "+ 1" under overlap_moe_expert_parallel_comm, and
// combined_1f1b.py's combined_1f1b_schedule_for_no_pipelining (F(i + 1) with B(i)) at pp 1.
// The stage holds at most one more micro-batch's activations than the base schedule.
std::vector<OverlapStep> overlap_schedule(PipelineSchedule schedule, int stages, int chunks,
                                          int micro, int stage);

// The layers where a merged pass pauses for the other in segment [first, end): each MoE
// block's first expert layer (before its dispatch) and the layer after its last (after its
// combine), ascending, inside (first, end).
std::vector<int> overlap_boundaries(const ModelSpec& m, int first, int end);

}  // namespace csim::core::hybrid
