// strategy.activation_offload (parse_parallel.hpp; docs/scenario.md,
// "strategy.activation_offload"): Megatron-Core's cpu_offloading with cpu_offloading_num_layers K
// (cpu_offloading_activations true, cpu_offloading_weights false), which hands the transformer
// block's layers to TransformerEngine's get_cpu_offload_context
// (megatron/core/transformer/transformer_block.py, TransformerBlock._get_cpu_offload_context /
// forward; transformer_engine/pytorch/cpu_offload.py). Megatron's own checks,
// megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__:
//   cpu_offloading_num_layers < 0 or >= num_layers  "CPU offloading can be done only for layers
//                                                     less than {num_layers}"
//   pipeline_model_parallel_size > 1                 "Currently there is no support for Pipeline
//                                                     parallelism with CPU offloading"
//   recompute_granularity is not None                "CPU offloading does not work when
//                                                     activation recomputation is enabled"
// The key applies where the Emitter lowers the step (core/lowering/hybrid_emitter.hpp: kinds
// tensor_parallel, 3d, zero, fsdp; kind pipeline has pp > 1).
#include <algorithm>

#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_activation_offload(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  if (!o.has("activation_offload")) return;
  const std::string at = o.at("activation_offload");
  // K = 0 is Megatron's cpu_offloading off (its check allows 0; TE's handler would divide by it).
  const int blocks = in.model.transformer.layers;
  ps.activation_offload =
      static_cast<int>(o.integer("activation_offload", 0, 0, std::max<i64>(0, blocks - 1)));
  if (ps.activation_offload == 0) return;
  if (!in.gpt()) {
    ctx.fail(at, "activation_offload offloads whole transformer blocks: the model has none",
             "remove activation_offload");
  }
  const bool emitter_kind = in.kind == StrategyKind::k3d || in.kind == StrategyKind::kPipeline ||
                            in.kind == StrategyKind::kTensorParallel ||
                            in.kind == StrategyKind::kZero || in.kind == StrategyKind::kFsdp;
  if (!emitter_kind) {
    ctx.fail(at,
             "activation_offload (Megatron-Core's cpu_offloading) is modelled for the kinds "
             "tensor_parallel, 3d, zero and fsdp",
             "use kind 3d with pp 1");
  }
  if (ps.pp > 1) {
    ctx.fail_conflict({at, o.at("pp")},
                      "Megatron-Core refuses cpu_offloading with pipeline parallelism "
                      "(TransformerConfig: \"no support for Pipeline parallelism with CPU "
                      "offloading\")",
                      "set pp to 1 or remove activation_offload");
  }
  if (ps.recompute != RecomputeMode::kNone) {
    ctx.fail_conflict({at, o.at("recompute")},
                      "Megatron-Core refuses cpu_offloading with activation recompute "
                      "(TransformerConfig: \"CPU offloading does not work when activation "
                      "recomputation is enabled\")",
                      "set recompute to \"none\" or remove activation_offload");
  }
  if (ps.moe_a2a_overlap != MoeA2aOverlap::kNone) {
    ctx.fail_conflict({at, o.at("moe_a2a_overlap")},
                      "activation offload with merged MoE passes is not modelled",
                      "remove moe_a2a_overlap or activation_offload");
  }
}

}  // namespace csim::core::parse
