// Layer formulas the decoder block's parts share (core/model/model_transformer.cpp builds the
// block; core/model/mla_layers.cpp its latent attention): a norm and a linear projection, per
// sample, forward. Every formula: docs/transformer.md, cited at its definition.
#pragma once

#include <cstdint>
#include <string>

#include "core/scenario/scenario.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// A norm over t positions of w features (docs/transformer.md, "Norms"); saves its input unless
// `input_saved` (another layer already holds that tensor).
LayerSpec norm_spec(std::string name, NormKind kind, std::int64_t w, double t, double e,
                    bool input_saved, TpRole role);

// Linear(in, out) at s positions (docs/transformer.md, "Projections"), with an optional bias.
LayerSpec linear_spec(std::string name, std::int64_t in, std::int64_t out, bool bias, double s,
                      double e, TpRole role);

}  // namespace csim::core
