// training.fp8 (docs/scenario.md, "training.fp8"; docs/fp8.md): the recipe and its options,
// checked against the GPU (Transformer Engine's support matrix, core/model/fp8_recipe.hpp) and,
// once the strategy is known, against it. Internal to core/ (the scenario parser calls these).
#pragma once

#include "core/scenario/parse_context.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core::parse {

// Reads training.fp8 from the training object `o` for precision `p` on `gpu`: with precision
// "fp8" the recipe must run on the GPU (exit 2 naming the GPU, the recipe and the compute
// capability it needs); with another precision the object is ignored with a warning.
Fp8Spec parse_fp8(Ctx& ctx, const Obj& o, Precision p, const GpuSpec& gpu);

// After the model and strategy: fp8_all_gather needs sharded parameters (FSDP or ZeRO-3); a model
// with no layer that runs in FP8 gets a warning.
void validate_fp8_scenario(Ctx& ctx, const Scenario& sc);

}  // namespace csim::core::parse
