// FP8 storage and communication of the MoE layers (docs/fp8.md, "MoE in FP8"): DeepSeek-V3's
// FP8 token dispatch (DeepEP) and its FP8 cache of the experts' SwiGLU input, each a switch of
// training.fp8 (moe_dispatch, moe_act_input), off by default.
#pragma once

#include "core/scenario/scenario.hpp"

namespace csim::core {

// Bytes per element of an FP8-quantised activation under `f`'s recipe over the bf16 bytes it
// replaces: (data + scale) / 2 (block: (1 + 4/128) / 2 = 0.515625).
double fp8_moe_quantised_factor(const Fp8Spec& f);

// Whether the dispatch-direction exchanges (the dispatch forward, the combine's gradient
// backward) move FP8 tokens: precision fp8 and training.fp8.moe_dispatch.
bool fp8_moe_dispatch(const TrainingSpec& t);

// training.fp8.moe_act_input: the experts' SwiGLU (the layer tagged with the moe_act recompute
// module) saves its input, 2 n elements for n outputs, in FP8 (data + scale bytes each) beside
// its t FP32 routing weights, instead of its bf16 saved set. No-op unless precision is fp8 and
// the switch is on.
void apply_fp8_moe_act_input(ModelSpec& m, const TrainingSpec& t);

}  // namespace csim::core
