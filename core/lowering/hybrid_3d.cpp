// 3D / hybrid parallelism (docs/program.md, "Pipeline, tensor, 3D, ZeRO/FSDP"): dp x tp x pp
// ranks, and the one lowering behind the pipeline, tensor_parallel, 3d, zero and fsdp kinds — the
// Emitter (hybrid_emitter.hpp) composed of one piece per parallel dimension. A kind is the same
// composition with some dimensions of size 1 (a piece with nothing to do emits nothing).
#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

Program lower_hybrid(const Scenario& s, const std::string& label, Progress* progress) {
  ProgramBuilder b(s, progress);
  hybrid::Emitter e(s, b);
  // Outermost first: the pieces nest around each layer kernel (docs/program.md, "Adding a
  // parallel dimension"). The pipeline wraps segment passes; data parallelism and sharding wrap
  // units (sharding's gathers inside the reduction's reach); recompute and tensor parallelism
  // wrap the kernel itself (a re-run carries its TP collectives).
  e.add_piece(hybrid::make_pipeline_piece(e));
  // Activation offload (pp 1) next: its forward commit sees the block's last compute op, TP's
  // collectives included, and its backward commit comes before every other piece's hooks.
  if (s.strategy.parallel.activation_offload > 0)
    e.add_piece(hybrid::make_activation_offload_piece(e));
  e.add_piece(hybrid::make_data_parallel_piece(e));
  // FSDP2 and Megatron-FSDP shard per block and root unit (fsdp2.cpp) instead of ZeRO/FSDP1's
  // per-unit gathers (zero_fsdp.cpp).
  // DeepSpeed's ZeRO-3 fetches per module at every use, a recompute re-run included, so its
  // piece sits inside the recompute piece (zero3_fetch.cpp).
  const bool zero3 = s.strategy.kind == StrategyKind::kZero && s.strategy.parallel.zero_stage == 3;
  if (!zero3) {
    e.add_piece(s.strategy.parallel.fsdp2.enabled ? hybrid::make_fsdp2_piece(e)
                                                  : hybrid::make_sharding_piece(e));
  }
  e.add_piece(hybrid::make_recompute_piece(e));
  e.add_piece(hybrid::make_recompute_modules_piece(e));
  if (zero3) e.add_piece(hybrid::make_zero3_piece(e));
  e.add_piece(hybrid::make_tensor_parallel_piece(e));
  // Innermost: the K/V exchange wraps the attention core's kernel (split into ring steps) and
  // nothing else.
  const ParallelSpec& ps = s.strategy.parallel;
  if (ps.cp > 1) e.add_piece(hybrid::make_context_parallel_piece(e));
  // The token dispatch and combine wrap the routed experts' kernels (expert_parallel.cpp).
  // Expert tensor parallelism's all-gather and reduce-scatter go with them
  // (expert_tensor_parallel.cpp).
  if (ps.ep > 1 || ps.etp > 1) e.add_piece(hybrid::make_expert_parallel_piece(e));
  std::string full = label;
  if (ps.cp > 1 && !full.empty() && full.back() == ')') {
    full.pop_back();
    full += ", cp " + std::to_string(ps.cp) + " " + to_string(ps.cp_comm) + ")";
  }
  if (ps.ep > 1 && !full.empty() && full.back() == ')') {
    full.pop_back();
    full += ", ep " + std::to_string(ps.ep) + ")";
  }
  if (ps.etp > 1 && !full.empty() && full.back() == ')') {
    full.pop_back();
    full += ", etp " + std::to_string(ps.etp) + ")";
  }
  e.build(full);
  return b.take();
}

Program lower_3d(const Scenario& s, Progress* progress) {
  const ParallelSpec& ps = s.strategy.parallel;
  std::string label = "3d (dp " + std::to_string(ps.dp) + " x tp " + std::to_string(ps.tp) +
                      " x pp " + std::to_string(ps.pp);
  label += std::string(", ") + to_string(ps.schedule);
  if (ps.virtual_stages > 1) label += " v " + std::to_string(ps.virtual_stages);
  label += ", m " + std::to_string(ps.micro_batches);
  if (ps.sequence_parallel) label += ", sequence parallel";
  if (ps.fsdp2.megatron)
    label += ", megatron_fsdp";
  else if (ps.zero_stage > 0)
    label += ", zero " + std::to_string(ps.zero_stage);
  if (ps.recompute != RecomputeMode::kNone) label += ", recompute " + recompute_label(ps);
  return lower_hybrid(s, label + ")", progress);
}

}  // namespace csim::core
