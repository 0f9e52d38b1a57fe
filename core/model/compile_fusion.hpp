// torch.compile (`training.compile: true`): the model pass that turns a built ModelSpec into what
// TorchInductor runs (docs/compile.md). Chains of consecutive pointwise layers of one transformer
// block, with the same tensor-parallel role, become one layer: one Triton kernel forward and one
// backward, FLOPs summed, memory traffic only the chain's external inputs and outputs (the
// intermediates stay in registers), saved activations as the min-cut partitioner keeps them.
// GEMMs and the batched attention GEMMs stay cuBLAS calls, unchanged. Applied by the parser after
// the model is built (core/scenario/scenario_parser.cpp), so every strategy lowers the compiled
// layers.
#pragma once

#include <vector>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// A layer Inductor generates a Triton kernel for: kind elementwise inside a transformer block,
// tensor-parallel role replicated or sharded (the pointwise roles; column, row and vocabulary
// layers are GEMMs or lookups with their collectives around them).
bool compile_fusible(const LayerSpec& l);

// Whether `next` joins the fused group that ends with `prev`: both fusible, the same block, the
// same tensor-parallel role (no TP collective lies between two such layers: shard_layer issues
// collectives only around column, row and vocabulary layers, core/lowering/tensor_parallel.cpp),
// and the same selective-recompute marking (the recompute piece re-runs marked runs whole).
bool compile_fuses(const LayerSpec& prev, const LayerSpec& next);

// One fused layer from consecutive members (docs/compile.md, "A fused group"); `before` is the
// layer feeding the first member (nullptr at the model's start): its output is the group's input.
LayerSpec fuse_layers(const std::vector<LayerSpec>& members, const LayerSpec* before);

struct CompileReport {
  int layers_before = 0;  // layers of the eager model
  int layers_after = 0;   // layers of the compiled model
  int fused_groups = 0;   // groups of two or more layers, or one layer whose kernels became one
  double fwd_bytes_saved_per_sample = 0;  // eager minus compiled forward traffic
  double bwd_bytes_saved_per_sample = 0;  // eager minus compiled backward traffic
  int fwd_kernels_saved = 0;              // eager minus compiled forward launches, per sample pass
};

// The compiled model: every maximal fusible chain replaced by fuse_layers of it; other layers
// unchanged. Deterministic; the transformer shape and the model's name are kept.
ModelSpec compile_model(const ModelSpec& eager, CompileReport* report = nullptr);

}  // namespace csim::core
