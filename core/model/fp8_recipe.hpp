// FP8 training recipes (docs/fp8.md): what each recipe needs of the GPU (Transformer Engine's
// support matrix), which layers run FP8 GEMMs, and the bytes of its casts, weight copies,
// scaling state and FP8 all-gather. Plain functions of the scenario's data; the lowering's cast
// and amax kernels are in core/lowering/fp8_lowering.cpp, the keys' parsing in core/parse_fp8.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// What a recipe quantises and how (docs/fp8.md, "Recipes").
struct Fp8RecipeTraits {
  Fp8Recipe recipe;
  const char* key;     // training.fp8.recipe value: "delayed", ...
  const char* title;   // for messages: "delayed scaling"
  int min_cc;          // lowest compute capability (x10: 89 = 8.9) that runs it
  int max_cc;          // highest (inclusive); 0 = no upper bound
  const char* needs;   // the requirement in words: "compute capability 8.9 or newer"
  bool amax_pass;      // a separate amax kernel before each activation / gradient cast
  bool amax_history;   // delayed scaling: an amax history + scale update once per step
  double data_bytes;   // bytes per quantised element (FP8 1, NVFP4 0.5)
  double scale_bytes;  // scale bytes per element (block 4/128, MXFP8 1/32, NVFP4 1/16)
  int copies;          // quantised copies a cast writes (2: rowwise + columnwise/transposed)
  bool weight_cache;   // FP8 weights cast on a step's first micro-batch and kept (TE);
                       // false: recast every forward and backward (torchao)
  // torchao's Float8Linear (matmul_with_hp_or_float8_args): the bf16 input and weight are saved
  // for backward and cast again there, along the other dimension for the weight gradient, with
  // the transposition copies torch._scaled_mm's layouts need; false: TE saves the columnwise
  // FP8 copy its forward cast wrote (docs/fp8.md, "Kernels").
  bool high_precision_saved;
  const char* source;  // where the behaviour is documented
};

const Fp8RecipeTraits& fp8_traits(Fp8Recipe r);
// The recipe's index in kFp8RecipeKeys order (the training.fp8.recipe choices).
inline constexpr const char* kFp8RecipeKeys[kNumFp8Recipes] = {
    "delayed", "current", "block", "mxfp8", "nvfp4", "rowwise", "tensorwise"};

// "" when `gpu` runs `r`; else the refusal (docs/fp8.md, "Support matrix"), e.g.
// "delayed scaling needs compute capability 8.9 or newer; A100-SXM4-80GB has 8.0".
std::string fp8_recipe_refusal(Fp8Recipe r, const GpuSpec& gpu);
// "" when the GPU runs FP8 attention (cuDNN's fused FP8 attention: compute capability 9.0 or
// newer); else the refusal.
std::string fp8_attention_refusal(const GpuSpec& gpu);

// Whether the layer's GEMM runs in FP8 (docs/fp8.md, "What runs in FP8"): the linear layers
// inside transformer blocks (kGemm, block >= 0); the LM head (kGemm outside blocks with the
// vocabulary-output role) with lm_head; the attention core (kAttention in a block) with attention.
bool runs_in_fp8(const LayerSpec& l, const Fp8Spec& f);
// The same for a whole scenario: false unless training.precision is "fp8".
bool runs_in_fp8(const LayerSpec& l, const TrainingSpec& t);

// Bytes of one quantised copy per element: data_bytes + scale_bytes.
double fp8_quantized_bytes_per_elem(const Fp8RecipeTraits& tr);
// Element bytes of the tensors FP8 GEMMs read when not quantised: bf16 (precision "fp8").
inline constexpr int kFp8HighPrecisionBytes = 2;

// Persistent FP8 weight copies of `params` parameters (docs/fp8.md, "Memory"): params x copies x
// (data + scale) bytes for recipes that cache them; 0 for torchao (recast, not kept).
Bytes fp8_weight_copy_bytes(std::int64_t params, const Fp8Spec& f);
// Scaling state of one FP8 GEMM (docs/fp8.md, "Memory"): delayed keeps, per quantised tensor
// (input, weight, output gradient: 3), an amax history of amax_history_len fp32 values plus a
// scale and its inverse (2 x 4 B); the other recipes keep no state across steps (0).
Bytes fp8_scaling_state_bytes(const Fp8Spec& f);
// The saved-for-backward share of an FP8 GEMM's input (docs/fp8.md, "Memory"): TE keeps the
// columnwise quantised copy instead of the bf16 input, (data + scale) / 2 of the bf16 bytes.
double fp8_saved_activation_factor(const Fp8Spec& f);
// Bytes an FSDP all-gather of `params` parameters moves per rank's full unit (docs/fp8.md,
// "FP8 all-gather"): fp8_all_gather quantises the shards before the gather, data + scale bytes
// per parameter; otherwise the parameters as stored (weights_bytes_per_param, 2 for bf16).
Bytes fp8_all_gather_bytes(std::int64_t params, const Fp8Spec& f, int weights_bytes_per_param);

// Scales the saved activations of the layers that run in FP8 by fp8_saved_activation_factor
// (called by the parser once the model and training.fp8 are known; no-op unless precision is
// "fp8").
void apply_fp8_saved_activations(ModelSpec& m, const TrainingSpec& t);

}  // namespace csim::core
