// The parallel-strategy driver (core/scenario/parse_parallel.hpp): the keys, and the per-dimension
// validators in the order they run.
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

const std::vector<std::string> kParallelKeys = {"dp",
                                                "tp",
                                                "pp",
                                                "cp",
                                                "cp_comm",
                                                "cp_a2a",
                                                "ep",
                                                "etp",
                                                "moe_dispatcher",
                                                "deepep_sms",
                                                "moe_a2a_overlap",
                                                "rank_order",
                                                "sequence_parallel",
                                                "tp_comm_overlap",
                                                "micro_batch_size",
                                                "schedule",
                                                "virtual_stages",
                                                "zero_stage",
                                                "fsdp_sharding",
                                                "prefetch",
                                                "overlap_grad_reduce",
                                                "recompute",
                                                "split_at",
                                                "stage_layers",
                                                "first_stage_layers",
                                                "last_stage_layers",
                                                "account_for_embedding",
                                                "account_for_loss",
                                                "recompute_every",
                                                "recompute_modules",
                                                "fsdp_version",
                                                "reshard_after_forward",
                                                "reduce_dtype",
                                                "replicate",
                                                "distributed_optimizer",
                                                "megatron_fsdp",
                                                "optimizer_offload",
                                                "activation_offload",
                                                "stage3_prefetch_bucket_size",
                                                "stage3_max_live_parameters",
                                                "stage3_max_reuse_distance",
                                                "stage3_param_persistence_threshold",
                                                "reduce_bucket_size",
                                                "overlap_comm",
                                                "zero3_fetch",
                                                "limit_all_gathers",
                                                "forward_prefetch",
                                                "backward_prefetch"};

// The FSDP version before the grid (FSDP2 gives kind fsdp the tp and pp dimensions); the grid
// next (every later check reads dp, tp, pp); the stage split right after the schedule (it reads
// virtual_stages, and its even-split refusal came from the schedule's check before);
// micro-batches after the schedule (the interleaved schedule constrains their count); FSDP2's and
// Megatron's sharding keys after zero_stage; model_parallel's split points; context parallelism
// last (it reads zero_stage); etp's checks after the experts' (they read ep, etp and the
// dispatcher).
const std::vector<ParallelValidator> kParallelValidators = {
    validate_fsdp_version,       validate_rank_grid,
    validate_tensor_parallel,    validate_pipeline_schedule,
    validate_stage_split,        validate_micro_batches,
    validate_sharding,           validate_fsdp2,
    validate_megatron_sharding,  validate_zero3,
    validate_recompute,          validate_model_split,
    validate_context_parallel,   validate_experts,
    validate_expert_tp,          validate_optimizer_offload,
    validate_activation_offload,
};

ParallelSpec parse_parallel(Ctx& ctx, const Obj& o, StrategyKind kind, int gpus,
                            const TrainingSpec& t, const ModelSpec& m, bool ga_given,
                            const ClusterSpec& c) {
  const ParallelInput in{ctx, o, kind, gpus, t, m, ga_given, c};
  ParallelSpec ps;
  for (ParallelValidator validate : kParallelValidators) validate(in, ps);
  return ps;
}

}  // namespace csim::core::parse
