// Validation of the parallel strategy (strategy.dp/tp/pp/... for the kinds model_parallel,
// pipeline, tensor_parallel, 3d, zero, fsdp; docs/scenario.md, "strategy: model, pipeline,
// tensor, 3D, ZeRO, FSDP"): one validator per parallel dimension, each in its own file, composed
// in a fixed order by parse_parallel (parse_parallel.cpp). Every inconsistency names the keys
// involved. Internal to core/ (the scenario parser calls parse_parallel).
//
// A validator reads its keys from the strategy object and fills its part of the ParallelSpec; it
// may read what earlier validators filled (the grid's dp, tp, pp come first), never what later
// ones fill. Adding a dimension (docs/program.md, "Adding a parallel dimension"): its keys in
// kParallelKeys, its fields in ParallelSpec, a parse_parallel_<dim>.cpp, one line in
// kParallelValidators.
#pragma once

#include <string>
#include <vector>

#include "core/scenario/parse_context.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core::parse {

// What every validator reads besides the spec being filled.
struct ParallelInput {
  Ctx& ctx;
  const Obj& o;  // the strategy object
  StrategyKind kind;
  int gpus;  // strategy.device_ids.size()
  const TrainingSpec& training;
  const ModelSpec& model;
  bool gradient_accumulation_given;  // training.gradient_accumulation was set explicitly
  const ClusterSpec& cluster;        // the nodes the ranks fold into (the dispatcher's links)

  bool gpt() const { return model.transformer.layers > 0; }
  bool model_parallel() const { return kind == StrategyKind::kModelParallel; }
};

using ParallelValidator = void (*)(const ParallelInput& in, ParallelSpec& ps);

// parse_parallel_grid.cpp: dp, tp, cp, pp (what the kind allows, the free one filling the GPUs)
// and rank_order.
void validate_rank_grid(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_tensor.cpp: tp needs model.gpt and a divisor of its heads; sequence_parallel.
void validate_tensor_parallel(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_pipeline.cpp: schedule, virtual_stages and the layer split over the chunks;
// micro_batch_size and the micro-batch count; model_parallel's split_at.
void validate_pipeline_schedule(const ParallelInput& in, ParallelSpec& ps);
void validate_micro_batches(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_stages.cpp: the blocks per pipeline segment (stage_layers, first_stage_layers /
// last_stage_layers, account_for_embedding / account_for_loss; the even split otherwise).
void validate_stage_split(const ParallelInput& in, ParallelSpec& ps);
void validate_model_split(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_sharding.cpp: zero_stage, fsdp_sharding, prefetch, overlap_grad_reduce.
void validate_sharding(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_fsdp2.cpp: fsdp_version (before the grid: FSDP2 allows tp and pp under kind
// fsdp); reshard_after_forward, reduce_dtype, replicate (HSDP); Megatron's
// distributed_optimizer and megatron_fsdp.
void validate_fsdp_version(const ParallelInput& in, ParallelSpec& ps);
void validate_fsdp2(const ParallelInput& in, ParallelSpec& ps);
void validate_megatron_sharding(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_offload.cpp: optimizer_offload (Megatron-Core's --optimizer-offload-fraction):
// a fraction in [0, 1], for Megatron's optimizer (kinds 3d, pipeline, tensor_parallel, or
// distributed_optimizer; not Megatron-FSDP) with Adam. Last: it reads the sharding keys.
void validate_optimizer_offload(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_act_offload.cpp: activation_offload (Megatron-Core's cpu_offloading with
// cpu_offloading_num_layers): a block count below the model's, for the kinds the Emitter lowers,
// with pp 1 and no recompute as Megatron's TransformerConfig requires. Last: it reads pp and
// recompute.
void validate_activation_offload(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_zero3.cpp: DeepSpeed ZeRO-3's stage3_* keys, reduce_bucket_size, overlap_comm.
void validate_zero3(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_recompute.cpp: recompute, recompute_every.
void validate_recompute(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_context.cpp: cp_comm, cp_a2a; cp (read with the grid) needs a fused attention
// core, a sequence divisible by 2 cp and, for the all-to-all exchanges, divisible heads.
void validate_context_parallel(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_experts.cpp: ep (expert parallelism: a mixture of experts whose expert count
// it divides, folded into tp x cp x dp, under the kinds whose sharding it models) and etp (etp x
// ep dividing tp x cp x dp); a mixture of experts with tp > 1 needs sequence parallelism and
// ep > 1 or etp = tp.
void validate_experts(const ParallelInput& in, ParallelSpec& ps);
// parse_parallel_etp.cpp: etp > 1 (expert tensor parallelism): a mixture of experts, ep > 1 or
// etp = tp, the kinds ep > 1 allows, etp dividing the experts' width, the alltoall dispatcher.
void validate_expert_tp(const ParallelInput& in, ParallelSpec& ps);
// Where the scenario gave the model's `key` (seq_len, heads, moe.experts): model.gpt.<key>,
// model.transformer.<key>, or with model.hf_config model.seq_len beside it and the config file
// for the shape (parse_parallel_context.cpp).
std::string model_key_path(const Ctx& ctx, const std::string& key);

// The strategy keys the validators read (any of them is an error for the other kinds).
extern const std::vector<std::string> kParallelKeys;
// The validators in the order they run (which decides which error a scenario with several
// problems reports first).
extern const std::vector<ParallelValidator> kParallelValidators;

// The driver: runs kParallelValidators in order on a default ParallelSpec.
ParallelSpec parse_parallel(Ctx& ctx, const Obj& o, StrategyKind kind, int gpus,
                            const TrainingSpec& t, const ModelSpec& m, bool ga_given,
                            const ClusterSpec& c);

}  // namespace csim::core::parse
