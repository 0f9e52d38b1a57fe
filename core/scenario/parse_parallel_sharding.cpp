// Sharding's keys (core/scenario/parse_parallel.hpp): ZeRO's zero_stage (default 1 under kind
// zero), FSDP's fsdp_sharding (full_shard = stage 3, shard_grad_op = stage 2), and the
// gather/reduce overlap switches prefetch and overlap_grad_reduce. Stages 2 and 3 shard gradients
// every micro-batch, which the pipeline schedules do not support.
#include "core/scenario/parse_parallel.hpp"

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
  // FSDP1's keys (docs/scenario.md; PyTorch's FullyShardedDataParallel arguments and defaults).
  const bool fsdp1 = kind == StrategyKind::kFsdp && ps.fsdp_version == 1;
  for (const char* key : {"limit_all_gathers", "forward_prefetch", "backward_prefetch"}) {
    if (o.has(key) && !fsdp1)
      ctx.fail(o.at(key), std::string(key) + " is an FSDP1 argument: it needs strategy.kind fsdp",
               "FSDP2 always prefetches one unit; DeepSpeed takes stage3_prefetch_bucket_size");
  }
  if (!fsdp1) return;
  ps.fsdp1.limit_all_gathers = o.boolean("limit_all_gathers", true);
  ps.fsdp1.forward_prefetch = o.boolean("forward_prefetch", false);
  ps.fsdp1.backward_prefetch = static_cast<BackwardPrefetch>(
      o.choice("backward_prefetch", {"backward_pre", "backward_post", "none"}, 0));
  // prefetch false: neither prefetch (the older switch), and the gathers wait for the compute.
  if (!ps.prefetch) {
    for (const char* key : {"forward_prefetch", "backward_prefetch"}) {
      if (o.has(key))
        ctx.fail_conflict({o.at("prefetch"), o.at(key)},
                          std::string("prefetch false contradicts ") + key,
                          "give one of them (prefetch false = no FSDP prefetch at all)");
    }
    ps.fsdp1.backward_prefetch = BackwardPrefetch::kNone;
  }
}

}  // namespace csim::core::parse
