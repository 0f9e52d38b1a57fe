// FP8 storage and communication of the MoE layers (core/model/fp8_moe.hpp). Every formula:
// docs/fp8.md, "MoE in FP8".
#include "core/model/fp8_moe.hpp"

#include "core/model/fp8_recipe.hpp"
#include "core/model/moe_layers.hpp"

namespace csim::core {

double fp8_moe_quantised_factor(const Fp8Spec& f) {
  // DeepEP's FP8 dispatch takes the tokens as (e4m3 data [num_tokens, hidden], FP32 scales
  // [num_tokens, hidden // 128]) (deep_ep/buffers/legacy.py, Buffer.dispatch, argument x); the
  // block recipe's traits carry the same 1 + 4/128 bytes per element.
  return fp8_quantized_bytes_per_elem(fp8_traits(f.recipe)) / kFp8HighPrecisionBytes;
}

bool fp8_moe_dispatch(const TrainingSpec& t) {
  return t.precision == Precision::kFp8 && t.fp8.moe_dispatch;
}

void apply_fp8_moe_act_input(ModelSpec& m, const TrainingSpec& t) {
  if (t.precision != Precision::kFp8 || !t.fp8.moe_act_input) return;
  const double q = fp8_moe_quantised_factor(t.fp8) * kFp8HighPrecisionBytes;
  const double fe = static_cast<double>(expert_ffn_hidden(m.transformer_config));
  for (LayerSpec& l : m.layers) {
    if ((l.recompute_modules & recompute_module::kMoeAct) == 0) continue;
    // n SwiGLU outputs (its bf16 output, e n); the input gate and up, 2 n elements at q bytes;
    // the t = n / f_e FP32 routing weights (docs/transformer.md, "Where the routing weights are
    // applied"): 2 q n + 4 t.
    const double n = l.output_bytes_per_sample / kFp8HighPrecisionBytes;
    l.activation_bytes_per_sample = 2.0 * q * n + 4.0 * n / fe;
    if (l.selective_activation_bytes_per_sample >= 0)
      l.selective_activation_bytes_per_sample = l.activation_bytes_per_sample;
  }
}

}  // namespace csim::core
