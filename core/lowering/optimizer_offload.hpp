// Optimizer-state offload: Megatron-Core's --optimizer-cpu-offload --optimizer-offload-fraction F
// (HybridDeviceOptimizer, megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py, with
// --use-precision-aware-optimizer and --overlap-cpu-optimizer-d2h-h2d as its README asks), the
// scheme of DeepSpeed's ZeRO-Offload (Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model
// Training", USENIX ATC'21): the optimizer step of a fraction of the parameters runs on the host.
// docs/program.md, "Optimizer offload", derives every figure below.
//
// Of the n parameters the rank's optimizer updates (its distributed-optimizer shard), the first
// n_off = ceil(F n) are offloaded (_get_sub_optimizer_param_groups moves whole tensors until
// offload_threshold = F x the GPU numel is reached; the model takes the fraction exactly):
//   memory   their fp32 master weights and Adam moments live in pinned host memory, not on the
//            GPU: GPU bytes - n_off x (master 4 + moments 8) = 12 F n (framework_states.cpp); the
//            host holds those 12 plus the pinned fp32 copy of the gradient (cpu_copy_map_grad), 4
//   traffic  per step, on the rank's own copy streams (two: Megatron's _d2h_stream and
//            _h2d_stream under overlap_cpu_optimizer_d2h_h2d), over the GPU's host link:
//              D2H  n_off x 4 bytes: the fp32 main gradient (decoupled_grad) into the fp32 CPU
//                   copy (`copy_(grad, non_blocking=True)`)
//              H2D  n_off x W bytes: the updated fp32 CPU parameter into the model's W-byte
//                   parameter (`gpu_param.data.copy_(param.data)`: ATen's copy_ converts to the
//                   destination dtype on the host before the transfer, aten/src/ATen/native/cuda/
//                   Copy.cu, copy_kernel_cuda)
//   compute  the host's Adam over n_off parameters at kHostAdamParamsPerCoreS x the rank's cores
//            (the node's cpu_cores / gpus_per_node)
//   overlap  Megatron builds one CPU optimizer per parameter tensor (build_cpu_optimizer_list) and
//            steps them in order, each waiting for its own gradient's D2H event and followed by
//            its own H2D: a three-stage pipeline. Modelled in `chunks` equal pieces (at most
//            kMaxOffloadChunks, at most the offloaded tensors): D2H_k, host Adam_k, H2D_k. The
//            GPU's (1 - F) part runs FusedAdam on the compute stream meanwhile; the step ends
//            when the last H2D and the GPU part are done (the H2D stream's event is waited on by
//            the current stream).
#pragma once

#include <cstdint>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// DeepSpeedCPUAdam's throughput: Ren et al. (ATC'21), Table 3, "Adam latency (s) comparison":
// 10 billion parameters in 2.57 s on the DGX-2 host (2 x Xeon Platinum 8168, 48 cores): 3.9e9
// parameters/s, 8.1e7 per core. torch.optim.AdamW on the CPU (Megatron's default CPU optimizer
// when TE's CPU Adam is absent) measured 5-7x slower there (PT-CPU: 14.81 s); the model takes
// the optimised figure, as Megatron's README recommends DeepSpeed's / TE's CPU Adam. The table's
// figures are as recalled when this was written: the paper was not re-read here; the 5-7x ratio
// over PyTorch's CPU Adam is confirmed by deepspeed.ai/tutorials/zero-offload. To re-check.
inline constexpr double kHostAdamParamsPerCoreS = 10e9 / 2.57 / 48.0;
// The pipeline's pieces (see above): more change the fill time by under 1/8 of a stage.
inline constexpr int kMaxOffloadChunks = 8;

// n_off: the parameters of `updated` that the host updates (0 without strategy.optimizer_offload).
std::int64_t offloaded_params(const Scenario& s, std::int64_t updated);

// The per-step cost of the offloaded part of one rank's optimizer.
struct OffloadStep {
  std::int64_t params = 0;  // n_off
  int chunks = 0;           // pipeline pieces
  Bytes d2h_bytes = 0;      // whole step: n_off x 4
  Bytes h2d_bytes = 0;      // whole step: n_off x W
  double host_adam_s = 0;   // whole step, on the rank's cores
};
OffloadStep offload_step(const Scenario& s, std::int64_t updated);

// Host memory the rank pins for its offloaded part: n_off x (12 + 4).
Bytes offload_host_bytes(const Scenario& s, std::int64_t updated);

}  // namespace csim::core
