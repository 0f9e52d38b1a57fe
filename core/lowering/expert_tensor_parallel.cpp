// Expert tensor parallelism (strategy.etp > 1; docs/program.md, "Expert tensor parallel"):
// each routed expert's GEMMs split over the etp ranks of an expert-tensor-parallel group, the
// fastest dimension of the expert grid (RankGrid::expert; Megatron-Core's parallel_state.py
// builds it with the expert RankGenerator, order "tp-ep-dp-pp" with tp read as etp). Megatron-
// Core's MoEAlltoAllTokenDispatcher (token_dispatcher.py) runs, per MoE block:
//
//   forward   all-to-all over EP (dispatch) -> dispatch_postprocess: all-gather over the expert
//             TP group (gather_from_sequence_parallel_region(..., group=self.tp_group), tp_group
//             being pg_collection.expt_tp) -> experts.fc on 2 f_e / etp output columns, swiglu,
//             experts.proj on f_e / etp input rows (TEGroupedMLP over the expert TP group) ->
//             combine_preprocess: reduce-scatter over the expert TP group
//             (reduce_scatter_to_sequence_parallel_region) -> all-to-all over EP (combine)
//   backward  the mirror: the combine's gradient all-to-all, the reduce-scatter's gradient (an
//             all-gather), the experts, the all-gather's gradient (a reduce-scatter), the
//             dispatch's gradient all-to-all.
//
// The members of an expert TP group share their EP index, so they hold the same experts: after
// the dispatch each has its own copies for them, c = e (s / (tp cp)) k h bytes per sample under
// balanced routing, and the all-gather hands every member the group's etp c. A rank's expert
// GEMMs then run etp times the tokens on 1/etp of the width: the same FLOPs per rank as etp 1
// (the FLOPs per token copy are 1/etp), 1/etp of the weights, etp times the input activation of
// experts.fc (read, and saved for its weight gradient) and the output of experts.proj (written
// before the reduce-scatter). The all-to-alls move the rank's own c, as with etp 1.
//
// This file holds the per-rank figures (shard_expert_tensor, used through shard_experts by the
// lowering and tune's memory bound) and the extra saved activation; the collectives are issued
// by the expert-parallel piece around its exchanges (expert_parallel.cpp).
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

void shard_expert_tensor(ShardedLayer& sl, const LayerSpec& l, int etp) {
  if (etp <= 1 || l.expert_role == ExpertRole::kNone) return;
  const double t = etp;
  switch (l.expert_role) {
    case ExpertRole::kFirst: {
      // experts.fc, column-parallel: its weight and bias (the second tensor) split by etp (the
      // parser makes etp divide f_e); the all-gathered input is etp times the rank's copies
      // (traffic = input + output, ShardedLayer), its output (etp tokens x 2 f_e / etp) unchanged.
      sl.params /= etp;
      sl.second_tensor_params /= etp;
      const double in = sl.traffic_per_sample - sl.output_bytes_per_sample;
      const double before = sl.traffic_per_sample;
      sl.traffic_per_sample += (t - 1) * in;
      if (sl.bwd_traffic_per_sample > 0)
        sl.bwd_traffic_per_sample *= sl.traffic_per_sample / before;
      // It saves its (gathered) input for the weight gradient.
      sl.act_bytes_per_sample *= t;
      sl.selective_act_bytes_per_sample *= t;
      break;
    }
    case ExpertRole::kLast: {
      // experts.proj, row-parallel: its weight split by etp, its bias whole (Megatron's
      // RowParallelLinear adds the bias after the reduction); it writes etp times the rank's
      // copies, partial sums the reduce-scatter adds up. Its output as the next layer reads it
      // (output_bytes_per_sample) is the reduce-scattered share, as with etp 1.
      const std::int64_t bias = sl.second_tensor_params;
      sl.params = (sl.params - bias) / etp + bias;
      const double before = sl.traffic_per_sample;
      sl.traffic_per_sample += (t - 1) * sl.output_bytes_per_sample;
      if (sl.bwd_traffic_per_sample > 0)
        sl.bwd_traffic_per_sample *= sl.traffic_per_sample / before;
      break;
    }
    default:
      // swiglu on etp tokens x f_e / etp: the same elements as etp 1.
      break;
  }
}

double etp_extra_stored_bytes_per_sample(const ModelSpec& m, Segment seg, const ParallelSpec& ps) {
  if (ps.etp <= 1) return 0.0;
  // experts.fc's saved input is etp times that of etp 1 (shard_expert_tensor): (etp - 1) times
  // what stored_activation_bytes_per_sample counted for it, where the policy keeps it.
  double extra = 0;
  for (int i = seg.first; i < seg.end; ++i) {
    const LayerSpec& l = m.layers[static_cast<std::size_t>(i)];
    if (l.expert_role != ExpertRole::kFirst) continue;
    const ShardedLayer sl = shard_layer(m, i, ps.tp, ps.sequence_parallel);
    const RecomputeMode mode = ps.recompute;
    if (mode == RecomputeMode::kNone ||
        (mode == RecomputeMode::kFull && !block_checkpointed(l.block, ps.recompute_every)))
      extra += sl.act_bytes_per_sample;
    else if (mode == RecomputeMode::kSelective)
      extra += sl.selective_act_bytes_per_sample;
  }
  return (ps.etp - 1) * extra;
}

}  // namespace csim::core
