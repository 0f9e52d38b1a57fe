// Expert tensor parallelism's checks (core/scenario/parse_parallel.hpp; docs/scenario.md,
// "strategy: expert parallelism"; docs/program.md, "Expert tensor parallel"). strategy.etp > 1
// splits each routed expert's GEMMs over the etp ranks of an expert-tensor-parallel group, the
// fastest dimension of the expert grid etp x ep x edp x pp (Megatron-Core's MoE Parallel Folding,
// parallel_state.py's expert RankGenerator, order "tp-ep-dp-pp" with etp at tp). validate_experts
// (parse_parallel_experts.cpp) has read ep and etp and checked that etp x ep divides tp x cp x dp
// when ep > 1; here what etp > 1 needs on top.
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_expert_tp(const ParallelInput& in, ParallelSpec& ps) {
  if (ps.etp <= 1) return;
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const TransformerConfig& tc = in.model.transformer_config;
  if (!tc.moe.any()) {
    ctx.fail(o.at("etp"), "etp " + std::to_string(ps.etp) + " needs a mixture of experts",
             "give model.transformer.moe (or an MoE model.hf_config), or remove strategy.etp");
  }
  // Without expert parallelism the expert grid must be the dense one (etp at tp's place, edp =
  // cp x dp): the experts' gradients then reduce over the dense layers' dp x cp groups.
  if (ps.ep <= 1 && ps.etp != ps.tp) {
    ctx.fail_conflict({o.at("etp"), o.at("tp")},
                      "etp " + std::to_string(ps.etp) + " with ep 1 and tp " +
                          std::to_string(ps.tp) +
                          " is not modelled: without expert parallelism the experts are split "
                          "by the dense layers' tensor-parallel group only",
                      "use etp = tp (Megatron-Core's default), or give strategy.ep > 1 with etp x "
                      "ep dividing tp x cp x dp");
  }
  // The same kinds as ep > 1 (validate_experts): the experts' sharding over edp is modelled
  // for Megatron's optimizer and ZeRO-1 only.
  const bool kind_ok = in.kind == StrategyKind::k3d || in.kind == StrategyKind::kPipeline ||
                       in.kind == StrategyKind::kZero;
  if (!kind_ok || ps.zero_stage > 1 || ps.fsdp2.enabled) {
    ctx.fail_conflict({o.at("etp"), o.at(o.has("zero_stage") ? "zero_stage" : "kind")},
                      "etp " + std::to_string(ps.etp) + " under strategy.kind " +
                          to_string(in.kind) + " is not modelled yet",
                      "use kind 3d or pipeline, or kind zero with zero_stage <= 1");
  }
  // experts.fc's gathered input (etp times etp 1's, etp_extra_stored_bytes_per_sample) is counted
  // under recompute none, selective with its default module and full; the other modules'
  // saved bytes with it are not derived yet.
  if (ps.recompute == RecomputeMode::kSelective &&
      ps.recompute_modules != recompute_module::kCoreAttn) {
    ctx.fail_conflict({o.at("etp"), o.at("recompute_modules")},
                      "etp " + std::to_string(ps.etp) +
                          " with recompute_modules other than [\"core_attn\"] is not modelled "
                          "(the gathered expert input a module's checkpoint keeps)",
                      "use etp 1, or recompute_modules [\"core_attn\"] (selective's default)");
  }
  // Megatron-Core's experts split fc1's 2 f_e output columns and fc2's f_e input rows by etp
  // (TEGroupedMLP / TEColumnParallelGroupedLinear over the expert-tensor-parallel group).
  const std::int64_t fe = tc.moe.expert_ffn_hidden > 0 ? tc.moe.expert_ffn_hidden : tc.ffn_hidden;
  if (fe > 0 && fe % ps.etp != 0) {
    ctx.fail_conflict({o.at("etp"), model_key_path(ctx, "moe.expert_ffn_hidden")},
                      "etp " + std::to_string(ps.etp) + " does not divide the experts' width " +
                          std::to_string(fe),
                      "use an etp dividing the expert ffn width");
  }
  // The expert-tensor-parallel all-gather and reduce-scatter are modelled around the alltoall
  // dispatcher's exchanges (MoEAlltoAllTokenDispatcher.dispatch_postprocess /
  // combine_preprocess). Megatron's allgather dispatcher gathers over the tp x ep group at once,
  // and its flex (DeepEP) dispatcher dispatches over tp x ep with tp x k copies: not modelled.
  if (ps.moe_dispatcher != MoeDispatcher::kAllToAll) {
    ctx.fail_conflict({o.at("etp"), o.at("moe_dispatcher")},
                      "etp " + std::to_string(ps.etp) +
                          " is modelled with moe_dispatcher alltoall only (the allgather and "
                          "deepep dispatchers exchange over the etp x ep group: not modelled)",
                      "use moe_dispatcher alltoall, or etp 1");
  }
}

}  // namespace csim::core::parse
