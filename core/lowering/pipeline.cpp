// Pipeline parallel (docs/program.md, "Pipeline parallel"): GPipe, 1F1B and interleaved 1F1B
// schedules over m micro-batches, the model split into pp * v contiguous segments, point-to-point
// sends between consecutive segments. The ops are emitted by lower_hybrid (hybrid_3d.cpp).
#include <algorithm>

#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

std::vector<PipeStep> pipeline_schedule(PipelineSchedule schedule, int stages, int chunks,
                                        int micro, int stage) {
  CSIM_ASSERT(stages >= 1 && chunks >= 1 && micro >= 1 && stage >= 0 && stage < stages);
  std::vector<PipeStep> out;
  if (schedule == PipelineSchedule::kGpipe) {
    // GPipe (Huang et al. 2019): every forward, then every backward. Backward in micro-batch
    // order: with uniform stages the flush takes (m + p - 1)(t_f + t_b) either way.
    for (int j = 0; j < micro; ++j) out.push_back({true, 0, j});
    for (int j = 0; j < micro; ++j) out.push_back({false, 0, j});
    return out;
  }
  if (schedule == PipelineSchedule::k1f1b) {
    // PipeDream-flush (Narayanan et al. 2021, section 2.2.1; Megatron's
    // forward_backward_pipelining_without_interleaving): warm-up p - stage - 1 forwards, steady
    // 1F1B, cool-down backwards. At most p - stage micro-batches are in flight on a stage.
    const int warm = std::min(stages - stage - 1, micro);
    for (int j = 0; j < warm; ++j) out.push_back({true, 0, j});
    for (int i = 0; i < micro - warm; ++i) {
      out.push_back({true, 0, warm + i});
      out.push_back({false, 0, i});
    }
    for (int i = micro - warm; i < micro; ++i) out.push_back({false, 0, i});
    return out;
  }
  // Interleaved 1F1B (Narayanan et al. 2021, section 2.2.2; Megatron's
  // forward_backward_pipelining_with_interleaving), m a multiple of p.
  const int total = micro * chunks;
  int warm = (stages - stage - 1) * 2 + (chunks - 1) * stages;
  if (micro == stages) warm = total;
  warm = std::min(warm, total);
  const int group = stages * chunks;
  auto fwd_step = [&](int k) {
    const int chunk = (k % group) / stages;
    const int mb = (k / group) * stages + k % stages;
    return PipeStep{true, chunk, mb};
  };
  auto bwd_step = [&](int k) {
    const int chunk = chunks - 1 - (k % group) / stages;
    const int mb = (k / group) * stages + k % stages;
    return PipeStep{false, chunk, mb};
  };
  for (int k = 0; k < warm; ++k) out.push_back(fwd_step(k));
  for (int i = 0; i < total - warm; ++i) {
    out.push_back(fwd_step(warm + i));
    out.push_back(bwd_step(i));
  }
  for (int i = total - warm; i < total; ++i) out.push_back(bwd_step(i));
  return out;
}

std::vector<Segment> partition_layers(const ModelSpec& m, int segments) {
  CSIM_ASSERT(segments >= 1);
  const int n = static_cast<int>(m.layers.size());
  std::vector<Segment> out(static_cast<std::size_t>(segments));
  if (m.transformer.layers > 0) {
    // GPT: blocks split evenly (the parser checks divisibility); the first segment also takes
    // the layers before block 0 (embedding), the last the layers after the last block.
    const int per = m.transformer.layers / segments;
    std::vector<int> first_of_block(static_cast<std::size_t>(m.transformer.layers), -1);
    for (int i = n - 1; i >= 0; --i) {
      if (m.layers[i].block >= 0) first_of_block[static_cast<std::size_t>(m.layers[i].block)] = i;
    }
    for (int g = 0; g < segments; ++g) {
      out[g].first = g == 0 ? 0 : first_of_block[static_cast<std::size_t>(g * per)];
      out[g].end = g + 1 == segments ? n : first_of_block[static_cast<std::size_t>((g + 1) * per)];
    }
    return out;
  }
  // Other models: boundary g at the first layer where the cumulative forward FLOPs reach
  // g / segments of the total, keeping at least one layer per segment.
  double total = 0;
  for (const LayerSpec& l : m.layers) total += l.fwd_flops_per_sample;
  int start = 0;
  double acc = 0;
  int i = 0;
  for (int g = 0; g < segments; ++g) {
    out[g].first = start;
    if (g + 1 == segments) {
      out[g].end = n;
      break;
    }
    const double target = total * (g + 1) / segments;
    i = start;
    acc += m.layers[i].fwd_flops_per_sample;
    ++i;  // at least one layer
    while (i < n - (segments - g - 1) && acc + m.layers[i].fwd_flops_per_sample <= target) {
      acc += m.layers[i].fwd_flops_per_sample;
      ++i;
    }
    out[g].end = i;
    start = i;
  }
  return out;
}

Program lower_pipeline(const Scenario& s) {
  const ParallelSpec& ps = s.strategy.parallel;
  std::string label =
      std::string("pipeline ") + to_string(ps.schedule) + " (pp " + std::to_string(ps.pp);
  if (ps.virtual_stages > 1) label += " x " + std::to_string(ps.virtual_stages) + " chunks";
  label += ", m " + std::to_string(ps.micro_batches);
  if (ps.dp > 1) label += ", dp " + std::to_string(ps.dp);
  return lower_hybrid(s, label + ")");
}

}  // namespace csim::core
