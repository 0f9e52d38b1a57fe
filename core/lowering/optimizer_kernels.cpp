// Optimizer and clipping kernels by PyTorch release (core/lowering/optimizer_kernels.hpp;
// docs/program.md, "Optimizer and clipping kernels").
#include "core/lowering/optimizer_kernels.hpp"

#include <algorithm>
#include <cmath>

#include "core/lowering/op_names.hpp"
#include "core/lowering/program_builder.hpp"

namespace csim::core {

int parameter_tensors(const LayerSpec& l) {
  if (l.params <= 0) return 0;
  return l.second_tensor_params > 0 && l.second_tensor_params < l.params ? 2 : 1;
}

std::int64_t parameter_tensors(const ModelSpec& m) {
  std::int64_t n = 0;
  for (const LayerSpec& l : m.layers) n += parameter_tensors(l);
  return n;
}

std::int64_t parameter_tensors_of_share(const ModelSpec& m, std::int64_t params) {
  const std::int64_t total = m.total_params();
  if (total <= 0 || params <= 0) return 1;
  const double share = static_cast<double>(params) / static_cast<double>(total);
  return std::max<std::int64_t>(1, std::llround(share * static_cast<double>(parameter_tensors(m))));
}

std::int64_t largest_parameter_tensor(const ModelSpec& m) {
  std::int64_t big = 0;
  for (const LayerSpec& l : m.layers) {
    if (l.params <= 0) continue;
    const std::int64_t second = l.second_tensor_params > 0 && l.second_tensor_params < l.params
                                    ? l.second_tensor_params
                                    : 0;
    big = std::max({big, l.params - second, second});
  }
  return big;
}

OptimizerLaunch optimizer_launch(const TrainingSpec& t, const PrecisionBytes& pb,
                                 std::int64_t params, std::int64_t tensors, bool torch_optim) {
  OptimizerLaunch o;
  const OptimizerCost foreach = optimizer_cost(t, pb, params);
  o.flops = foreach.flops;
  if (!torch_optim || !optimizer_runs_for_loop(t) || params <= 0) {
    o.kernels = 5;
    o.traffic = foreach.traffic;
    o.python_ops = o.kernels;
    return o;
  }
  const std::int64_t s = 4;  // fp32 moments / momentum buffer
  const std::int64_t g = pb.grads, p = pb.master > 0 ? pb.master : pb.weights;
  double per_tensor = 0;
  std::int64_t per_param = 0;
  if (t.optimizer == OptimizerKind::kAdam) {
    per_tensor = 7;
    per_param = 14 * s + 3 * g + 2 * p;
  } else if (t.sgd_momentum > 0) {
    per_tensor = 3;
    per_param = 5 * s + g + 2 * p;
  } else {
    per_tensor = 1;
    per_param = g + 2 * p;
  }
  if (pb.master > 0) {  // the updated master copied back into the model's weights
    per_tensor += 1;
    per_param += pb.master + pb.weights;
  }
  const double n = static_cast<double>(std::max<std::int64_t>(tensors, 1));
  o.kernels = per_tensor * n;
  o.traffic = params * per_param;
  // The Python loop body per tensor (state lookup, the bias corrections in floats) on top of
  // each kernel's op.
  o.python_ops = (per_tensor + 1) * n;
  return o;
}

ClipLaunch clip_grad_norm_launch(const TrainingSpec& t, const PrecisionBytes& pb,
                                 std::int64_t params, std::int64_t tensors) {
  ClipLaunch c;
  const double n = static_cast<double>(std::max<std::int64_t>(tensors, 1));
  const bool per_tensor = t.pytorch_version < 200;
  // Norms: every gradient read once (G bytes); the partial norms are scalars. Per tensor a norm
  // each; foreach: _foreach_norm, stack, norm, + eps, div, clamp (6).
  c.norms.traffic = params * pb.grads;
  c.norms.flops = 2.0 * static_cast<double>(params);
  c.norms.kernels = c.norms.python_ops = per_tensor ? n : 6;
  // The per-tensor total: stack, norm, + eps, reciprocal, * max_norm (5 small kernels).
  c.total.kernels = c.total.python_ops = per_tensor ? 5 : 0;
  // Scale: every gradient read and written (2 G).
  c.scale.traffic = 2 * params * pb.grads;
  c.scale.flops = static_cast<double>(params);
  c.scale.kernels = c.scale.python_ops = per_tensor ? n : 1;
  c.host_sync = clip_syncs_host(t);
  return c;
}

namespace {

// One op per layer with parameters, each `cost(layer)`'s kernels; the first waits on `deps`.
template <class Cost>
OpId emit_per_layer(ProgramBuilder& b, const Lane& l, const std::string& name,
                    std::vector<Dep> deps, Cost cost) {
  OpId last = kNoOp;
  for (const LayerSpec& layer : b.scenario().model.layers) {
    if (parameter_tensors(layer) == 0) continue;
    const OptimizerLaunch c = cost(layer);
    last = b.compute(l, NameRef::cat({name, " ", layer.name}), ComputeKind::kElementwise, c.flops,
                     c.traffic, c.kernels, true,
                     last == kNoOp ? std::move(deps) : std::vector<Dep>{}, Phase::kOptimizer);
    b.program().ops[static_cast<std::size_t>(last)].python_ns = b.python_ns(c.python_ops);
  }
  return last;
}

OpId emit_launch(ProgramBuilder& b, const Lane& l, const NameRef& name, const OptimizerLaunch& c,
                 std::vector<Dep> deps) {
  const OpId id = b.compute(l, name, ComputeKind::kElementwise, c.flops, c.traffic, c.kernels, true,
                            std::move(deps), Phase::kOptimizer);
  b.program().ops[static_cast<std::size_t>(id)].python_ns = b.python_ns(c.python_ops);
  return id;
}

}  // namespace

OpId emit_for_loop_optimizer(ProgramBuilder& b, const Lane& l, std::vector<Dep> deps) {
  const Scenario& s = b.scenario();
  const PrecisionBytes pb = b.precision();
  return emit_per_layer(b, l, op_names::optimizer_step(s.training.optimizer).str(b.program().names),
                        std::move(deps), [&](const LayerSpec& layer) {
                          return optimizer_launch(s.training, pb, layer.params,
                                                  parameter_tensors(layer), true);
                        });
}

OpId emit_clip_grad_norm(ProgramBuilder& b, const Lane& l, std::vector<Dep> deps) {
  const Scenario& s = b.scenario();
  const PrecisionBytes pb = b.precision();
  const auto per_layer = [&](const LayerSpec& x) {
    return clip_grad_norm_launch(s.training, pb, x.params, parameter_tensors(x));
  };
  const ClipLaunch all =
      clip_grad_norm_launch(s.training, pb, s.model.total_params(), parameter_tensors(s.model));
  const bool per_tensor = all.total.kernels > 0;
  // The norms: per tensor one kernel each (one op per layer), then the total's small kernels;
  // foreach: its launches in one op.
  OpId norms = kNoOp;
  if (per_tensor) {
    emit_per_layer(b, l, "clip_grad_norm_ norm", std::move(deps),
                   [&](const LayerSpec& x) { return per_layer(x).norms; });
    norms = emit_launch(b, l, "clip_grad_norm_ total", all.total, {});
  } else {
    norms = emit_launch(b, l, "clip_grad_norm_ norms", all.norms, std::move(deps));
  }
  std::vector<Dep> scale_deps;
  if (all.host_sync)
    scale_deps = {{b.marker(l.thread, l.gpu, "clip_coef < 1 (host sync)",
                            {{norms, DepKind::kHostWaits}}, Phase::kOptimizer),
                   DepKind::kHostWaits}};
  if (!per_tensor)
    return emit_launch(b, l, "clip_grad_norm_ mul_", all.scale, std::move(scale_deps));
  return emit_per_layer(b, l, "clip_grad_norm_ mul_", std::move(scale_deps),
                        [&](const LayerSpec& x) { return per_layer(x).scale; });
}

}  // namespace csim::core
