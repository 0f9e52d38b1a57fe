// The optimizer step's and gradient clipping's kernels as the PyTorch release a scenario names
// runs them (training.pytorch_version; docs/program.md, "Optimizer and clipping kernels", where
// every count and byte figure below is derived from the cited source).
//
//   optimizer.step(), torch.optim or transformers.AdamW, state and parameters streamed per step:
//     foreach (PyTorch >= 2.0 default on CUDA: torch/optim/optimizer.py,
//       _default_to_fused_or_foreach): the multi-tensor kernels stream every parameter, its grad
//       and its state once: params x (2 W + G + 2 S + 2 M) bytes, 5 launches (optimizer_cost).
//     for-loop (PyTorch < 2.0, and Hugging Face's transformers.AdamW of its Trainer before it
//       switched to torch's: optimization.py AdamW.step): per parameter tensor
//       Adam  exp_avg.mul_, .add_, exp_avg_sq.mul_, .addcmul_, sqrt, .add_(eps), p.addcdiv_:
//             7 kernels, (14 s + 3 G + 2 P) bytes per element (s = 4, the fp32 moments; P the
//             updated copy's element bytes: the master where there is one, else the weights)
//       SGD   p.add_(grad): 1 kernel, 2 P + G; with momentum buf.mul_, .add_, p.add_(buf):
//             3 kernels, 5 s + G + 2 P.
//   torch.nn.utils.clip_grad_norm_ (training.clip_grad_norm > 0):
//     PyTorch < 2.0: one norm kernel per gradient tensor (reads G), stack, norm, + eps, the
//       reciprocal and the multiply of max_norm / total (5 kernels), then one mul_ per tensor
//       (reads and writes G); PyTorch < 1.10 decides whether to multiply on the host
//       (`if clip_coef < 1:`, a device-to-host copy: the host waits for the backward to end;
//       removed by pytorch PR 61042).
//     PyTorch >= 2.0 (foreach, pytorch PR 91846): _foreach_norm, stack, norm, + eps, div, clamp,
//       _foreach_mul_: 7 launches, the same bytes, no host wait.
//   Both multiply every gradient: a pre-1.10 clip whose norm is below max_norm skips the mul_
//   kernels, which the model does not know (it counts them).
#pragma once

#include <cstdint>

#include <vector>

#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

class ProgramBuilder;
struct Lane;

// PyTorch's optimizers default to their foreach implementation from 2.0 on.
inline bool optimizer_runs_for_loop(const TrainingSpec& t) {
  return t.pytorch_version < 200;
}
inline bool clip_syncs_host(const TrainingSpec& t) {
  return t.pytorch_version < 110;
}

// Parameter tensors of a layer (LayerSpec::second_tensor_params: a bias or a second table) and of
// a model; the largest one (a for-loop optimizer's per-tensor temporaries).
int parameter_tensors(const LayerSpec& l);
std::int64_t parameter_tensors(const ModelSpec& m);
std::int64_t largest_parameter_tensor(const ModelSpec& m);
// The tensors a rank's optimizer loops over when it updates `params` of the model's parameters
// (a shard, a device's layers): the model's tensors in that proportion, at least 1.
std::int64_t parameter_tensors_of_share(const ModelSpec& m, std::int64_t params);

// One optimizer.step() over `params` parameters held in `tensors` tensors.
struct OptimizerLaunch {
  double kernels = 0;
  Bytes traffic = 0;
  double flops = 0;
  double python_ops = 0;  // framework ops the host pays (docs/program.md, "Host costs")
};
// `torch_optim`: the step is PyTorch's (or transformers') optimizer, not a fused library one
// (Megatron's, DeepSpeed's FusedAdam: always the multi-tensor figures).
OptimizerLaunch optimizer_launch(const TrainingSpec& t, const PrecisionBytes& pb,
                                 std::int64_t params, std::int64_t tensors, bool torch_optim);

// clip_grad_norm_ over `params` gradients in `tensors` tensors, in three parts: the norms (per
// tensor before 2.0; foreach's launches from 2.0, the total's kernels with them), the total of a
// per-tensor clip (its fixed kernels: emitted once, over the whole model), then (after the host's
// test of the total before 1.10) the multiply.
struct ClipLaunch {
  OptimizerLaunch norms;
  OptimizerLaunch total;
  OptimizerLaunch scale;
  bool host_sync = false;
};
ClipLaunch clip_grad_norm_launch(const TrainingSpec& t, const PrecisionBytes& pb,
                                 std::int64_t params, std::int64_t tensors);

// A for-loop optimizer.step() over the model's layers, one op per layer with parameters (its
// tensors' kernels), in order on `l`; `deps` gate the first. Returns the last op.
OpId emit_for_loop_optimizer(ProgramBuilder& b, const Lane& l, std::vector<Dep> deps);
// clip_grad_norm_ over the model's gradients on `l`: the norms (one op per layer when per tensor,
// else one), the total, before 1.10 the host's wait for it, then the multiply. Returns the last op.
OpId emit_clip_grad_norm(ProgramBuilder& b, const Lane& l, std::vector<Dep> deps);

}  // namespace csim::core
