// Layer formulas the decoder block's parts share (core/model/block_layers.hpp). Every formula:
// docs/transformer.md, cited at the line that implements it.
#include "core/model/block_layers.hpp"

#include <utility>

#include "core/model/model_builders.hpp"

namespace csim::core {

namespace {
using CK = ComputeKind;
}  // namespace

// A norm over t positions of w features (docs/transformer.md, "Norms"): LayerNorm weight + bias,
// 5 FLOPs/elem, saves fp32 mean and rstd (8 B per position); RMSNorm weight only, 4 FLOPs/elem,
// saves fp32 rstd (4 B per position). Both read and write the tensor (2e/elem) and save their
// input unless `input_saved` (another layer already holds that tensor).
LayerSpec norm_spec(std::string name, NormKind kind, std::int64_t w, double t, double e,
                    bool input_saved, TpRole role) {
  const bool ln = kind == NormKind::kLayerNorm;
  const double n = t * static_cast<double>(w);
  const double stats = (ln ? 8.0 : 4.0) * t;
  LayerSpec l =
      make_layer(std::move(name), CK::kElementwise, role, ln ? 2 * w : w, (ln ? 5.0 : 4.0) * n,
                 2.0 * e * n, (input_saved ? 0.0 : e * n) + stats, e * n, 1);
  if (ln) l.second_tensor_params = w;  // weight and bias
  // Backward (docs/transformer.md, "Backward traffic"): one kernel reads dy and x and writes dx,
  // a second reads dy and x again for the weight (and bias) gradients: 5e/elem + the statistics.
  l.bwd_bytes_per_sample = 5.0 * e * n + stats;
  return l;
}

// Linear(in, out) at s positions (docs/transformer.md, "Projections"): params in*out (+ out
// bias); FLOPs 2 s in out; traffic e s (in + out); saves its input (e s in).
LayerSpec linear_spec(std::string name, std::int64_t in, std::int64_t out, bool bias, double s,
                      double e, TpRole role) {
  const double di = static_cast<double>(in), dout = static_cast<double>(out);
  LayerSpec l = make_layer(std::move(name), CK::kGemm, role, in * out + (bias ? out : 0),
                           2.0 * s * di * dout, e * s * (di + dout), e * s * di, e * s * dout, 1);
  l.gemm = GemmShape{1, static_cast<std::int64_t>(s), out, in};  // docs/cost-model.md, "GEMM shape"
  if (bias) l.second_tensor_params = out;
  return l;
}

}  // namespace csim::core
