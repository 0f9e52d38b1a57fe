// FP8 casts, amax reductions and scaling state in the lowering (docs/fp8.md, "Kernels" and
// "Memory"). Every byte count below is derived there; q = data + scale bytes per quantised
// element of the recipe, c = its quantised copies per cast, e_hp = 2 (bf16).
#include "core/lowering/fp8_lowering.hpp"

#include <cmath>

#include "core/lowering/program_builder.hpp"
#include "core/model/fp8_recipe.hpp"

namespace csim::core {

Fp8Lowering::Fp8Lowering(const Scenario& s) : s_(s) {
  fp8_layer_.reserve(s.model.layers.size());
  for (const LayerSpec& l : s.model.layers)
    fp8_layer_.push_back(runs_in_fp8(l, s.training) ? 1 : 0);
}

bool Fp8Lowering::fp8_layer(int layer) const {
  return layer >= 0 && static_cast<std::size_t>(layer) < fp8_layer_.size() &&
         fp8_layer_[static_cast<std::size_t>(layer)] != 0;
}

// One elementwise cast / amax kernel: 1 FLOP per element, `bytes` of traffic, one framework op.
// The first kernel emitted takes `deps` (which is then emptied).
OpId Fp8Lowering::cast_op(ProgramBuilder& b, const Lane& l, const NameRef& name, double elems,
                          Bytes bytes, bool python, std::vector<Dep>& deps, Phase phase) {
  std::vector<Dep> d = std::move(deps);
  deps.clear();
  return b.compute(l, name, ComputeKind::kElementwise, elems, bytes, 1, python, std::move(d),
                   phase);
}

void Fp8Lowering::quantize(ProgramBuilder& b, const Lane& l, const std::string& label,
                           const char* what, double elems, bool python, std::vector<Dep>& deps,
                           Phase phase) {
  const Fp8RecipeTraits& tr = fp8_traits(s_.training.fp8.recipe);
  const double q = fp8_quantized_bytes_per_elem(tr);
  if (tr.amax_pass) {
    // current / NVFP4 scaling: an amax pass reads the bf16 tensor, n x e_hp bytes.
    cast_op(b, l, NameRef::cat({label, ".fp8_amax_", what}), elems,
            static_cast<Bytes>(std::llround(elems * kFp8HighPrecisionBytes)), python, deps, phase);
  }
  // The cast(+transpose) reads the bf16 tensor and writes c copies: n x (e_hp + c x q) bytes.
  cast_op(b, l, NameRef::cat({label, ".fp8_cast_", what}), elems,
          static_cast<Bytes>(std::llround(elems * (kFp8HighPrecisionBytes + tr.copies * q))),
          python, deps, phase);
}

std::vector<Dep> Fp8Lowering::before_forward(ProgramBuilder& b, const Lane& l, int layer,
                                             std::int64_t params, double saved_act_bytes_per_sample,
                                             std::int64_t batch, const std::string& label,
                                             bool python, std::vector<Dep> deps) {
  if (!fp8_layer(layer)) return deps;
  const Fp8Spec& f = s_.training.fp8;
  const Fp8RecipeTraits& tr = fp8_traits(f.recipe);
  const double q = fp8_quantized_bytes_per_elem(tr);
  const double c = tr.copies;
  const Phase phase = Phase::kForward;
  // docs/fp8.md, "Kernels": the weight cast reads the bf16 weight and writes c copies,
  // P x (e_hp + c x q) bytes; TE casts on the step's first micro-batch and keeps the copies,
  // torchao on every forward.
  const auto key = std::make_pair(l.gpu, layer);
  const auto it = cast_step_.find(key);
  const bool first_ever = it == cast_step_.end();
  const bool cast_weight = !tr.weight_cache || first_ever || it->second != b.step();
  if (first_ever) {
    // docs/fp8.md, "Memory": the cached copies and the scaling state live from the first cast on.
    const Bytes copies = fp8_weight_copy_bytes(params, f);
    if (copies > 0)
      b.alloc(l.thread, l.stream, l.gpu, MemCategory::kParams, copies, label + " fp8 weights");
    const Bytes state = fp8_scaling_state_bytes(f);
    if (state > 0) {
      b.alloc(l.thread, l.stream, l.gpu, MemCategory::kBuffers, state,
              label + " fp8 scaling state");
      ++gemms_on_gpu_[l.gpu];
    }
  }
  cast_step_[key] = b.step();
  const double p = static_cast<double>(params);
  if (cast_weight && params > 0 && tr.high_precision_saved) {
    // torchao: hp_tensor_to_float8_dynamic(weight): an amax pass when the recipe takes one.
    quantize(b, l, label, "weight", p, python, deps, phase);
  } else if (cast_weight && params > 0) {
    cast_op(b, l, NameRef::cat({label, ".fp8_cast_weight"}), p,
            static_cast<Bytes>(std::llround(p * (kFp8HighPrecisionBytes + c * q))), python, deps,
            phase);
  }
  // The input: n = saved bytes / q elements (TE saves the GEMM's input in FP8; torchao saves it
  // in bf16: n = saved bytes / e_hp).
  const double n = saved_act_bytes_per_sample * static_cast<double>(batch) /
                   (tr.high_precision_saved ? kFp8HighPrecisionBytes : q);
  quantize(b, l, label, "input", n, python, deps, phase);
  return deps;
}

std::vector<Dep> Fp8Lowering::before_backward(ProgramBuilder& b, const Lane& l, int layer,
                                              std::int64_t params, double output_bytes_per_sample,
                                              std::int64_t batch, const std::string& label,
                                              bool python, std::vector<Dep> deps) {
  if (!fp8_layer(layer)) return deps;
  const Fp8RecipeTraits& tr = fp8_traits(s_.training.fp8.recipe);
  const double q = fp8_quantized_bytes_per_elem(tr);
  const Phase phase = Phase::kBackward;
  // The incoming gradient has the layer's output's elements: g = output bytes / e_hp.
  const double g = output_bytes_per_sample * static_cast<double>(batch) / kFp8HighPrecisionBytes;
  quantize(b, l, label, "grad", g, python, deps, phase);
  if (!tr.high_precision_saved) return deps;
  // torchao (float8_linear.py, matmul_with_hp_or_float8_args.backward) casts from the bf16
  // tensors it saved: the weight again for the input-gradient GEMM, and the gradient and the
  // input along the other dimension for the weight-gradient GEMM; torch._scaled_mm wants its
  // first operand row-major and its second column-major, so the weight, the gradient's and the
  // input's dim-1 casts are transposed by a copy each (torchao's preprocess_addmm:
  // `.contiguous()` / `.t().contiguous().t()`), q read and q written per element.
  const double p = static_cast<double>(params);
  const double n =
      input_elems_per_sample(layer, output_bytes_per_sample) * static_cast<double>(batch);
  const auto transpose = [&](const char* what, double elems) {
    cast_op(b, l, NameRef::cat({label, ".fp8_transpose_", what}), elems,
            static_cast<Bytes>(std::llround(elems * 2 * q)), python, deps, phase);
  };
  if (params > 0) {
    quantize(b, l, label, "weight", p, python, deps, phase);
    transpose("weight", p);
  }
  quantize(b, l, label, "grad_dim1", g, python, deps, phase);
  transpose("grad_dim1", g);
  quantize(b, l, label, "input_dim1", n, python, deps, phase);
  transpose("input_dim1", n);
  return deps;
}

double Fp8Lowering::input_elems_per_sample(int layer, double output_bytes_per_sample) const {
  // The caller's output bytes may be a slice of the layer's (tensor parallelism, a pipeline
  // chunk's share): the input scales with them.
  const LayerSpec& ls = s_.model.layers[static_cast<std::size_t>(layer)];
  const double share =
      ls.output_bytes_per_sample > 0 ? output_bytes_per_sample / ls.output_bytes_per_sample : 1.0;
  return ls.activation_bytes_per_sample / kFp8HighPrecisionBytes * share;
}

void Fp8Lowering::mark(ProgramBuilder& b, OpId gemm, int layer) const {
  if (fp8_layer(layer)) b.set_dtype(gemm, Dtype::kFp8);
}

std::vector<Dep> Fp8Lowering::before_optimizer(ProgramBuilder& b, const Lane& l,
                                               std::vector<Dep> deps) {
  const auto it = gemms_on_gpu_.find(l.gpu);
  if (it == gemms_on_gpu_.end() || it->second == 0) return deps;
  // docs/fp8.md, "Kernels": TE's fused amax-and-scale update reads and writes every GEMM's
  // scaling state (3 tensors x (H amax values + scale + scale_inv) x 4 B): 2 x n x state bytes,
  // H FLOPs per tensor (the max over the history).
  const double n = static_cast<double>(it->second);
  const Fp8Spec& f = s_.training.fp8;
  const Bytes bytes = 2 * it->second * fp8_scaling_state_bytes(f);
  cast_op(b, l, "fp8 amax history update", n * 3.0 * f.amax_history_len, bytes, true, deps,
          Phase::kOptimizer);
  return deps;
}

}  // namespace csim::core
