// Compute cost model (docs/cost-model.md, "Compute"):
//   duration = max(FLOPs / (peak(dtype) * efficiency(kind, FLOPs)), bytes / (mem_bw *
//   mem_bw_efficiency))
//              + kernel_overhead
#pragma once

#include "core/program.hpp"
#include "core/scenario.hpp"

namespace csim::core {

double efficiency(const EfficiencyCurve& curve, double flops);
// max_efficiency > 0 replaces the kind curve's max_efficiency (Op::max_efficiency: a fused
// attention kernel's own figure, docs/attention.md, "Efficiency"); its half_flops still applies.
TimeNs compute_duration_ns(const GpuSpec& gpu, ComputeKind kind, Dtype dtype, double flops,
                           Bytes bytes, double max_efficiency = 0);

// A kCompute op's kernel time: from its GEMM shape when it has one (docs/cost-model.md, "GEMM
// shape"; core/cost/gemm_shape_cost.hpp), else compute_duration_ns of its FLOPs and bytes.
TimeNs op_compute_ns(const GpuSpec& gpu, const Op& op);

}  // namespace csim::core
