// FSDP2's keys and the Megatron-side sharding flags (core/scenario/parse_parallel.hpp;
// docs/scenario.md, "FSDP2, HSDP and Megatron's sharding"; lowering in core/lowering/fsdp2.cpp).
//
//   fsdp_version 2 (kind fsdp)  PyTorch's fully_shard: one unit per transformer block plus the
//                               root (embedding, final norm, LM head); tp and pp allowed
//   reshard_after_forward       true / false / "default" (torchtitan's policy)
//   reduce_dtype                fp32 (torchtitan's default) / bf16 / fp16: the reduce-scatter's
//   replicate                   HSDP: shard over dp / replicate ranks, all-reduce across replicas
//   distributed_optimizer       Megatron's --use-distributed-optimizer: zero_stage 1
//   megatron_fsdp               Megatron-FSDP (optim_grads_params): the FSDP2 lowering with every
//                               block resharded; needs distributed_optimizer
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_fsdp_version(const ParallelInput& in, ParallelSpec& ps) {
  // Runs before the grid: FSDP2 lifts kind fsdp's refusal of tp and pp.
  const Obj& o = in.o;
  ps.fsdp_version = static_cast<int>(o.integer("fsdp_version", 1, 1, 2));
  if (o.has("fsdp_version") && in.kind != StrategyKind::kFsdp) {
    in.ctx.fail(o.at("fsdp_version"), "fsdp_version applies to strategy.kind fsdp",
                "use kind fsdp, or megatron_fsdp with Megatron's kinds (3d, zero)");
  }
  ps.fsdp2.enabled = ps.fsdp_version == 2;
}

void validate_fsdp2(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const bool v2 = ps.fsdp_version == 2;
  for (const char* key : {"reshard_after_forward", "reduce_dtype", "replicate"}) {
    if (o.has(key) && !v2) {
      ctx.fail(o.at(key), std::string(key) + " is an FSDP2 key: it needs strategy.fsdp_version 2",
               "set strategy.kind fsdp and strategy.fsdp_version 2");
    }
  }
  if (!v2) return;
  if (o.has("fsdp_sharding")) {
    ctx.fail_conflict({o.at("fsdp_sharding"), o.at("fsdp_version")},
                      "FSDP2 (fully_shard) has no fsdp_sharding",
                      "use reshard_after_forward: true = full_shard, false = shard_grad_op");
  }
  if (o.has("reshard_after_forward")) {
    const json& v = o.raw("reshard_after_forward");
    if (v.is_boolean()) {
      ps.fsdp2.reshard = v.get<bool>() ? ReshardPolicy::kAlways : ReshardPolicy::kNever;
    } else if (!v.is_string() || v.get<std::string>() != "default") {
      ctx.fail(o.at("reshard_after_forward"),
               "expected true, false or \"default\", got " + describe_value(v),
               "\"default\" is torchtitan's policy: every block but the last, none under pp");
    }
  }
  const int rd = o.choice("reduce_dtype", {"fp32", "bf16", "fp16"}, 0);
  ps.fsdp2.reduce_bytes = rd == 0 ? 4 : 2;
  ps.fsdp2.replicate = static_cast<int>(o.integer("replicate", 1, 1, 1 << 16));
  if (ps.dp % ps.fsdp2.replicate != 0) {
    ctx.fail_conflict({o.at("replicate"), o.at("dp")},
                      "replicate " + std::to_string(ps.fsdp2.replicate) + " does not divide dp " +
                          std::to_string(ps.dp),
                      "HSDP shards over dp / replicate ranks (typically one node): pick a "
                      "divisor of dp");
  }
}

void validate_megatron_sharding(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const bool megatron_kind = in.kind == StrategyKind::k3d || in.kind == StrategyKind::kZero ||
                             in.kind == StrategyKind::kPipeline ||
                             in.kind == StrategyKind::kTensorParallel;
  ps.distributed_optimizer = o.boolean("distributed_optimizer", false);
  const bool mfsdp = o.boolean("megatron_fsdp", false);
  for (const char* key : {"distributed_optimizer", "megatron_fsdp"}) {
    if (o.has(key) && !megatron_kind) {
      ctx.fail(o.at(key),
               std::string(key) +
                   " is a Megatron flag: it applies to kinds 3d, zero, pipeline "
                   "and tensor_parallel",
               in.kind == StrategyKind::kFsdp ? "kind fsdp shards with fsdp_sharding or "
                                                "fsdp_version 2"
                                              : "use kind 3d");
    }
  }
  if (ps.distributed_optimizer && o.has("zero_stage") && ps.zero_stage != 1 && !mfsdp) {
    ctx.fail_conflict({o.at("distributed_optimizer"), o.at("zero_stage")},
                      "Megatron's distributed optimizer is ZeRO stage 1, zero_stage is " +
                          std::to_string(ps.zero_stage),
                      "give one of distributed_optimizer and zero_stage");
  }
  if (ps.distributed_optimizer) ps.zero_stage = 1;
  if (!mfsdp) return;
  if (!ps.distributed_optimizer) {
    ctx.fail(o.at("megatron_fsdp"), "Megatron-FSDP needs Megatron's distributed optimizer",
             "add \"distributed_optimizer\": true (Megatron: --use-distributed-optimizer)");
  }
  if (o.has("zero_stage")) {
    ctx.fail_conflict({o.at("megatron_fsdp"), o.at("zero_stage")},
                      "megatron_fsdp shards optimizer state, gradients and parameters itself",
                      "remove zero_stage");
  }
  if (ps.pp > 1) {
    ctx.fail_conflict({o.at("megatron_fsdp"), o.at("pp")},
                      "megatron_fsdp with pipeline parallelism is not modelled",
                      "use kind fsdp with fsdp_version 2 (FSDP2 x PP), or pp 1");
  }
  // Megatron-FSDP's optim_grads_params: every unit resharded after forward, gradients reduced
  // in the main-gradient dtype (docs/program.md, "FSDP2", Megatron-FSDP).
  ps.zero_stage = 3;
  ps.fsdp2.enabled = true;
  ps.fsdp2.megatron = true;
  ps.fsdp2.reshard = ReshardPolicy::kAlways;
  ps.fsdp2.reduce_bytes = precision_bytes(in.training.precision, in.training.amp_dtype).grads;
}

}  // namespace csim::core::parse
