// Sharding's keys (core/parse_parallel.hpp): ZeRO's zero_stage (default 1 under kind zero), FSDP's
// fsdp_sharding (full_shard = stage 3, shard_grad_op = stage 2), and the gather/reduce overlap
// switches prefetch and overlap_grad_reduce. Stages 2 and 3 shard gradients every micro-batch,
// which the pipeline schedules do not support.
#include "core/parse_parallel.hpp"

namespace csim::core::parse {

void validate_sharding(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const StrategyKind kind = in.kind;
  ps.zero_stage =
      static_cast<int>(o.integer("zero_stage", kind == StrategyKind::kZero ? 1 : 0, 0, 3));
  ps.fsdp =
      static_cast<FsdpSharding>(o.choice("fsdp_sharding", {"full_shard", "shard_grad_op"}, 0));
  if (o.has("fsdp_sharding") && kind != StrategyKind::kFsdp) {
    ctx.fail(o.at("fsdp_sharding"), "fsdp_sharding applies to strategy.kind fsdp",
             "use kind fsdp, or zero_stage with kind zero");
  }
  if (kind == StrategyKind::kFsdp) {
    if (o.has("zero_stage"))
      ctx.fail(o.at("zero_stage"), "kind fsdp takes fsdp_sharding, not zero_stage",
               "full_shard = ZeRO-3, shard_grad_op = ZeRO-2");
    ps.zero_stage = ps.fsdp == FsdpSharding::kFullShard ? 3 : 2;
  }
  // FSDP2 x PP is torchtitan's layout (gradients reduced once per step: fsdp2.cpp); DeepSpeed's
  // ZeRO-2/3 and FSDP1 stay refused.
  if (ps.zero_stage >= 2 && ps.pp > 1 && ps.fsdp_version != 2) {
    ctx.fail(o.at("zero_stage"),
             "ZeRO stage " + std::to_string(ps.zero_stage) +
                 " shards gradients per micro-batch, which pipeline parallelism (pp " +
                 std::to_string(ps.pp) + ") does not support",
             "use zero_stage 1 (Megatron's distributed optimizer) with pp > 1");
  }
  if (in.model_parallel() && ps.zero_stage > 0)
    ctx.fail(o.at("zero_stage"), "model_parallel has no data parallelism to shard over",
             "use kind zero or 3d");
  ps.prefetch = o.boolean("prefetch", true);
  ps.overlap_grad_reduce = o.boolean("overlap_grad_reduce", true);
}

}  // namespace csim::core::parse
