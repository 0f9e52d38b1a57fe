// Megatron-Core's selective recompute modules over the layer list (docs/program.md, "Activation
// recompute", "Recompute modules"; megatron/core/transformer/transformer_config.py,
// TransformerConfig.recompute_modules). The transformer builders tag each layer with the modules
// it belongs to (LayerSpec::recompute_modules); this file turns the chosen modules into groups of
// layers re-run before the backward that needs them. core_attn is not here: it is the attention
// core the builders mark with LayerSpec::selective_recompute (core/lowering/recompute.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// Output-discarding checkpoints (Megatron's CheckpointWithoutOutput: moe_act, layernorm,
// mla_up_proj): the module runs without saving anything of its own, its inputs are saved, and its
// output's storage is freed once the next module has consumed it (discard_output_and_register_
// recompute), so the copy the consumer saved is gone too; the module re-runs when the gradient
// reaches the consumer. The others (mlp, moe, shared_experts) are ordinary checkpoints
// (tensor_parallel.checkpoint / te_checkpoint): the input is saved, nothing inside, the output is
// kept, and the module re-runs before its own backward.
bool recompute_module_discards_output(std::uint8_t module);

struct RecomputeGroup {
  std::uint8_t module = 0;  // one recompute_module bit
  std::vector<int> layers;  // the members, in forward order
  int consumer = -1;        // output-discarding: the layer after the last member; else -1
};

// The groups of layers [first, end) re-run under `modules` (core_attn left out): a member's
// effective module is moe before mlp before shared_experts before the rest (a whole MoE layer's
// checkpoint contains its shared experts' and activation's); a group is a run of consecutive
// layers of one block with the same effective module, except mla_up_proj, whose members (q up,
// kv up, RoPE) are one group per block with the down projections between them.
std::vector<RecomputeGroup> recompute_groups(const ModelSpec& m, int first, int end,
                                             std::uint8_t modules);

// Forward FLOPs per sample the groups re-run, over the whole model (hardware FLOPs).
double recompute_modules_flops_per_sample(const ModelSpec& m, std::uint8_t modules);

}  // namespace csim::core
