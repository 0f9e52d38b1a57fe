// Roofline compute cost (docs/cost-model.md, "Compute").
#include "core/cost/compute_cost.hpp"

#include <algorithm>

#include "core/cost/gemm_shape_cost.hpp"
#include "core/error.hpp"

namespace csim::core {

// docs/cost-model.md, "Compute": efficiency(F) = max_efficiency * F / (F + half_flops).
// A saturating curve because small kernels cannot fill every SM (too few thread blocks, tails of
// partial waves) while large ones approach a fixed fraction of peak; half_flops is the size at
// which half of that fraction is reached.
double efficiency(const EfficiencyCurve& curve, double flops) {
  if (!(flops > 0)) return 0.0;
  return curve.max_efficiency * flops / (flops + curve.half_flops);
}

// docs/cost-model.md, "Compute" (with H_d = half_flops * peak(d) / peak_max) and "Power limit"
// (c = compute_clock_factor, the sustained clock under the cluster's power cap):
//   duration = max(FLOPs / (c * peak(dtype) * efficiency(kind, FLOPs)),
//                  bytes / (mem_bw * mem_bw_efficiency)) + kernel_overhead
TimeNs compute_duration_ns(const GpuSpec& gpu, ComputeKind kind, Dtype dtype, double flops,
                           Bytes bytes, double max_efficiency) {
  const double peak = gpu.peak_flops_per_s(dtype);
  CSIM_ASSERT_MSG(peak > 0, "the GPU lacks this dtype (the scenario parser rejects such input)");
  CSIM_ASSERT_MSG(gpu.compute_clock_factor > 0 && gpu.compute_clock_factor <= 1,
                  "compute_clock_factor out of (0, 1]");
  CSIM_ASSERT(flops >= 0 && bytes >= 0);
  double compute_s = 0, memory_s = 0;
  if (flops > 0) {
    // half_flops is stated at the GPU's highest dense peak; scale it to this dtype so the ramp
    // time half_flops / (peak_max * max_efficiency) is the same for every dtype. peak_max is the
    // highest of the fp32 .. bf16 peaks: the FP8 peak is left out so that adding it to a GPU
    // changes no bf16 kernel's duration (docs/fp8.md, "FP8 GEMM efficiency").
    const double peak_max = std::max({gpu.peak_fp32_flops_per_s, gpu.peak_tf32_flops_per_s,
                                      gpu.peak_fp16_flops_per_s, gpu.peak_bf16_flops_per_s});
    // Only the curve's numbers are copied (not its `source` text: one allocation per kernel).
    // FP8 GEMMs have a curve of their own (docs/fp8.md); FP8 attention uses the attention curve.
    const EfficiencyCurve& curve = dtype == Dtype::kFp8 && kind == ComputeKind::kGemm
                                       ? gpu.fp8_gemm_efficiency
                                       : gpu.efficiency[static_cast<int>(kind)];
    EfficiencyCurve c;
    // A kernel with its own figure (a fused attention kernel: docs/attention.md, "Efficiency")
    // keeps the kind's ramp (half_flops) and replaces only the asymptote.
    c.max_efficiency = max_efficiency > 0 ? max_efficiency : curve.max_efficiency;
    c.half_flops = curve.half_flops * (peak / peak_max);
    const double eff = efficiency(c, flops);
    CSIM_ASSERT_MSG(eff > 0, "efficiency curve with max_efficiency <= 0");
    compute_s = flops / (gpu.compute_clock_factor * peak * eff);
  }
  if (bytes > 0) {
    const double bw = gpu.mem_bw_bytes_per_s * gpu.mem_bw_efficiency;
    CSIM_ASSERT_MSG(bw > 0, "GPU without memory bandwidth");
    memory_s = static_cast<double>(bytes) / bw;
  }
  return round_to_ns(std::max(compute_s, memory_s)) + gpu.kernel_overhead_ns;
}

// docs/cost-model.md, "GEMM shape": a GEMM with a shape is timed from it; everything else (convs,
// attention, elementwise, GEMMs of the explicit and legacy builders, any GEMM on a GPU without an
// SM count) keeps the curve above.
TimeNs op_compute_ns(const GpuSpec& gpu, const Op& op) {
  if (op.fixed_ns >= 0) return op.fixed_ns;  // measured (docs/replay.md, "Durations")
  if (op.compute_kind == ComputeKind::kGemm && !op.gemm.empty() && gpu.sm_count > 0)
    return gemm_duration_ns(gpu, op.dtype, op.gemm, op.gemm_pass, op.max_efficiency);
  return compute_duration_ns(gpu, op.compute_kind, op.dtype, op.flops, op.bytes, op.max_efficiency);
}

}  // namespace csim::core
