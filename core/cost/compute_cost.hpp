// Compute cost model (docs/cost-model.md, "Compute"):
//   duration = max(FLOPs / (peak(dtype) * efficiency(kind, FLOPs)), bytes / (mem_bw *
//   mem_bw_efficiency))
//              + kernel_overhead
#pragma once

#include "core/program.hpp"
#include "core/scenario.hpp"

namespace csim::core {

double efficiency(const EfficiencyCurve& curve, double flops);
TimeNs compute_duration_ns(const GpuSpec& gpu, ComputeKind kind, Dtype dtype, double flops,
                           Bytes bytes);

}  // namespace csim::core
