// GEMM time from its shape (docs/cost-model.md, "GEMM shape").
#include "core/cost/gemm_shape_cost.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace csim::core {
namespace {

struct Tile {
  int m, n;
};

// Thread-block tiles cuBLAS / CUTLASS choose from (docs/cost-model.md, "GEMM shape"). Tensor-core
// dtypes: CUTLASS's DefaultGemmConfiguration for OpClassTensorOp (default_gemm_configuration.h:
// ThreadblockShape 128x256 on sm_70 .. sm_80, the same tile CUTLASS 3's sm_90 kernels use), its
// transpose, and 128x128 (NVIDIA, "Matrix Multiplication Background User's Guide", "Tile
// quantization": cuBLAS picks among such tiles per shape). FP32 without tensor cores: the SIMT
// default 128x128.
constexpr Tile kTensorTiles[] = {{128, 256}, {256, 128}, {128, 128}};
constexpr Tile kSimtTiles[] = {{128, 128}};
// Split-K factors (CUTLASS's split-K parallel reduction, cuBLASLt's
// CUBLASLT_ALGO_CONFIG_SPLITK_NUM): a GEMM with fewer output tiles than SMs splits k into S slices
// run as separate tiles, whose fp32 partial sums a reduction kernel adds. Only while the output
// tiles leave SMs idle.
constexpr int kSplitK[] = {1, 2, 4, 8, 16};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

GemmShape dgrad_shape(const GemmShape& f) {
  return GemmShape{f.batch, f.m, f.k, f.n};
}
GemmShape wgrad_shape(const GemmShape& f) {
  return GemmShape{f.batch, f.k, f.n, f.m};
}

// docs/cost-model.md, "GEMM shape", for a tile Tm x Tn and a split-K factor S:
//   tiles     = batch * ceil(m / Tm) * ceil(n / Tn) * S
//   waves     = ceil(tiles / SMs)
//   t_tile    = e_c * batch * m * n * S / tiles / (mem_bw * mem_bw_efficiency / SMs)  (epilogue)
//             + 2 * Tm * Tn * ceil(k / S) / (peak(d) / SMs * tile_efficiency * g)    (main loop)
//   (g = fp8_grouped_gemm_efficiency for an FP8 GEMM with batch > 1, else 1)
//   t_reduce  = S > 1: batch * m * n * (4 S + e_out) / (mem_bw * mem_bw_efficiency)
//   t_compute = min over (tile, S) of waves * t_tile + t_reduce
//   t_memory  = batch * (e * (m k + k n) + e_out * m n) / (mem_bw * mem_bw_efficiency)
//   t         = max(t_compute, t_memory)
// with e_c = e_out unsplit, 4 (fp32 partial sums) when split; peak(d) is the sustained peak
// c * peak(d) under the cluster's power cap (docs/cost-model.md, "Power limit").
GemmPlan plan_gemm(const GpuSpec& gpu, Dtype dtype, const GemmShape& s, double max_efficiency) {
  CSIM_ASSERT(!s.empty());
  CSIM_ASSERT_MSG(gpu.sm_count > 0, "GPU without an SM count");
  const double peak = gpu.compute_clock_factor * gpu.peak_flops_per_s(dtype);
  CSIM_ASSERT_MSG(peak > 0, "the GPU lacks this dtype (the scenario parser rejects such input)");
  const EfficiencyCurve& curve = dtype == Dtype::kFp8
                                     ? gpu.fp8_gemm_efficiency
                                     : gpu.efficiency[static_cast<int>(ComputeKind::kGemm)];
  const double tile_eff = dtype != Dtype::kFp8 && gpu.gemm_tile_efficiency > 0
                              ? gpu.gemm_tile_efficiency
                              : curve.max_efficiency;
  // An FP8 grouped GEMM (batch > 1: the experts of an MoE block, one launch) at the GPU's grouped
  // fraction of a single FP8 GEMM's efficiency (docs/cost-model.md, "GEMM shape").
  const double eff = (max_efficiency > 0 ? max_efficiency : tile_eff) *
                     (s.batch > 1 && dtype == Dtype::kFp8 ? gpu.fp8_grouped_gemm_efficiency : 1.0);
  CSIM_ASSERT_MSG(eff > 0, "gemm efficiency <= 0");
  const double bw = gpu.mem_bw_bytes_per_s * gpu.mem_bw_efficiency;
  CSIM_ASSERT_MSG(bw > 0, "GPU without memory bandwidth");
  const double sms = gpu.sm_count;
  const double e = dtype_bytes(dtype);
  // FP8 GEMMs write bf16 outputs (docs/fp8.md); every other dtype writes its own.
  const double e_out = dtype == Dtype::kFp8 ? 2.0 : e;
  const bool tensor = dtype != Dtype::kFp32 && gpu.compute_capability >= 70;
  const Tile* begin = tensor ? std::begin(kTensorTiles) : std::begin(kSimtTiles);
  const Tile* end = tensor ? std::end(kTensorTiles) : std::end(kSimtTiles);
  const double c_elems =
      static_cast<double>(s.batch) * static_cast<double>(s.m) * static_cast<double>(s.n);
  GemmPlan best;
  bool first = true;
  for (const Tile* t = begin; t != end; ++t) {
    const std::int64_t out_tiles = s.batch * ceil_div(s.m, t->m) * ceil_div(s.n, t->n);
    for (int split : kSplitK) {
      if (split > 1 && (out_tiles >= gpu.sm_count || split > s.k)) break;
      GemmPlan p;
      p.tile_m = t->m;
      p.tile_n = t->n;
      p.split_k = split;
      p.tiles = out_tiles * split;
      p.waves = ceil_div(p.tiles, gpu.sm_count);
      const double e_c = split > 1 ? 4.0 : e_out;  // split-K partial sums are fp32
      const double k_per_split = static_cast<double>(ceil_div(s.k, split));
      p.tile_s = e_c * c_elems * split / static_cast<double>(p.tiles) / (bw / sms) +
                 2.0 * t->m * t->n * k_per_split / (peak / sms * eff);
      p.reduce_s = split > 1 ? c_elems * (4.0 * split + e_out) / bw : 0.0;
      p.compute_s = static_cast<double>(p.waves) * p.tile_s + p.reduce_s;
      // Ties keep the earlier candidate (the larger tile, the smaller split): deterministic.
      if (first || p.compute_s < best.compute_s) best = p;
      first = false;
    }
  }
  const double m = static_cast<double>(s.m), n = static_cast<double>(s.n),
               k = static_cast<double>(s.k), b = static_cast<double>(s.batch);
  best.memory_s = b * (e * (m * k + k * n) + e_out * m * n) / bw;
  return best;
}

// docs/cost-model.md, "GEMM shape": each product is a kernel; the backward runs dgrad then wgrad.
TimeNs gemm_duration_ns(const GpuSpec& gpu, Dtype dtype, const GemmShape& fwd, GemmPass pass,
                        double max_efficiency) {
  auto one = [&](const GemmShape& s) {
    return round_to_ns(plan_gemm(gpu, dtype, s, max_efficiency).seconds()) + gpu.kernel_overhead_ns;
  };
  switch (pass) {
    case GemmPass::kForward:
      return one(fwd);
    case GemmPass::kDgrad:
      return one(dgrad_shape(fwd));
    case GemmPass::kWgrad:
      return one(wgrad_shape(fwd));
    case GemmPass::kBackward:
      return one(dgrad_shape(fwd)) + one(wgrad_shape(fwd));
  }
  return 0;
}

}  // namespace csim::core
