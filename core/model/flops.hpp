// Model and hardware FLOPs per training step, for MFU and HFU (docs/program.md, "FLOPs
// utilisation"). Model FLOPs count the work the model needs (forward + backward, no recompute);
// hardware FLOPs add what activation recompute runs again.
//
// GPT (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
// Using Megatron-LM", eq. 3 and appendix; Korthikanti et al. 2022, section 6), B = global batch,
// s = sequence, l = blocks, h = hidden, V = vocabulary, ffn 4h:
//   model    = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))        (~6 N per token plus attention)
//   hardware = model                                           recompute none
//            = model + 4 B s^2 h l                              selective (QK^T and AV again)
//            = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))           full (every block's forward again)
// For a general ffn width f the per-block forward is 8 s h^2 + 4 s h f + 4 s^2 h and the logits
// 2 s h V per sample; model = 3 B (l (8 s h^2 + 4 s h f + 4 s^2 h) + 2 s h V).
// The general block (model.transformer, model.hf_config): core/model/transformer_flops.hpp and
// docs/transformer.md, "Model FLOPs" (GQA, SwiGLU, head_dim, causal attention and windows).
// Other models: model = 3 B sum(fwd_flops_per_sample); hardware = model.
//   MFU = model FLOPs per step / (step time x GPUs x dense peak of the compute dtype)
//   HFU = hardware FLOPs per step / (the same)
#pragma once

#include "core/scenario/scenario.hpp"

namespace csim::core {

double model_flops_per_step(const Scenario& s);
double hardware_flops_per_step(const Scenario& s);

}  // namespace csim::core
