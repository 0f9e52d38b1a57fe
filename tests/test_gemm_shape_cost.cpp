// GEMM time from its shape (docs/cost-model.md, "GEMM shape"); expected values derived in comments.
#include <catch2/catch.hpp>

#include "core/cost/compute_cost.hpp"
#include "core/cost/gemm_shape_cost.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// Round figures: 100 SMs, 100 TFLOP/s fp16, 1 TB/s x 0.8. Per SM: 1 TFLOP/s of peak, at tile
// efficiency 0.5 a main-loop rate of 0.5 TFLOP/s, and 8 GB/s of HBM bandwidth.
GpuSpec test_gpu() {
  GpuSpec g;
  g.name = "test";
  g.peak_fp32_flops_per_s = 20e12;
  g.peak_fp16_flops_per_s = 100e12;
  g.peak_bf16_flops_per_s = 100e12;
  g.mem_bw_bytes_per_s = 1e12;
  g.mem_bw_efficiency = 0.8;
  g.sm_count = 100;
  g.compute_capability = 80;
  g.kernel_overhead_ns = 2000;
  for (auto& c : g.efficiency) c = EfficiencyCurve{0.8, 1e9, "test"};
  g.gemm_tile_efficiency = 0.5;
  return g;
}

}  // namespace

TEST_CASE("a row-parallel GEMM with k = 192: 384 tiles in 4 waves, the epilogue a quarter",
          "[gemm_shape]") {
  // GPT h = 1536 at TP 8, attn.proj: m = 4 x 2048 = 8192, n = 1536, k = 1536 / 8 = 192.
  // Tile 128 x 256: 64 x 6 = 384 tiles < 100 SMs? no: no split-K; waves ceil(384 / 100) = 4.
  //   t_tile = 2 B x 128 x 256 / 8 GB/s (store) + 2 x 128 x 256 x 192 / 0.5 TFLOP/s
  //          = 8.192 us + 25.165824 us = 33.357824 us; x 4 waves = 133.431296 us.
  // 256 x 128 is the same; 128 x 128: 768 tiles, 8 waves of 4.096 + 12.582912 us, the same
  // 133.431296 us: the tie keeps the first (128 x 256).
  // Memory: 2 x (8192 x 192 + 192 x 1536 + 8192 x 1536) / 0.8 TB/s = 36.12672 us < compute.
  const GpuSpec g = test_gpu();
  const GemmShape s{1, 8192, 1536, 192};
  const GemmPlan p = plan_gemm(g, Dtype::kFp16, s);
  CHECK(p.tile_m == 128);
  CHECK(p.tile_n == 256);
  CHECK(p.split_k == 1);
  CHECK(p.tiles == 384);
  CHECK(p.waves == 4);
  CHECK(p.tile_s == Approx(33.357824e-6));
  CHECK(p.compute_s == Approx(133.431296e-6));
  CHECK(p.memory_s == Approx(36.12672e-6));
  // + 2 us kernel overhead: 135,431 ns for 4.83 GFLOP, 35.7 % of peak where the tile runs at 50 %.
  CHECK(gemm_duration_ns(g, Dtype::kFp16, s, GemmPass::kForward) == 133431 + 2000);
}

TEST_CASE("a 192-wide GEMM fills one partial wave: 64 tiles on 100 SMs", "[gemm_shape]") {
  // A column-parallel shard 192 wide: m = 8192, n = 192, k = 1536. Tile 128 x 256: 64 x 1 = 64
  // tiles (a 256-wide tile computing 192 columns), one wave on 64 of the 100 SMs.
  //   store: 2 B x (8192 x 192 / 64 tiles) / 8 GB/s = 6.144 us
  //   loop:  2 x 128 x 256 x 1536 / 0.5 TFLOP/s   = 201.326592 us  -> 207.470592 us
  // Split-K (64 tiles < 100 SMs): S = 2 is 128 tiles, 2 waves of 4 x 8192 x 192 x 2 / 128 / 8 GB/s
  // + 100.663296 us = 112.951296 us, + the reduction 8192 x 192 x (4 x 2 + 2) / 0.8 TB/s
  // = 19.6608 us: 245.563392 us, slower; S = 4 (3 waves) too. 128 x 128: 128 tiles, 2 waves of
  // 3.072 + 100.663296 us = 207.470592 us, a tie. So 207.470592 us: 4.83 GFLOP at 23 % of peak.
  const GpuSpec g = test_gpu();
  const GemmPlan p = plan_gemm(g, Dtype::kFp16, GemmShape{1, 8192, 192, 1536});
  CHECK(p.tiles == 64);
  CHECK(p.waves == 1);
  CHECK(p.split_k == 1);
  CHECK(p.tile_n == 256);
  CHECK(p.compute_s == Approx(207.470592e-6));
  CHECK(p.seconds() == Approx(207.470592e-6));
}

TEST_CASE("a weight gradient with few output tiles splits k", "[gemm_shape]") {
  // attn.proj's weight gradient at TP 8: dW[192 x 1536] = X^T[192 x 8192] dY[8192 x 1536], so
  // m = 192, n = 1536, k = 8192. 128 x 128 tiles: 2 x 12 = 24 output tiles; split-K 4 makes 96
  // tiles, one wave:
  //   store: 4 B (fp32 partials) x 192 x 1536 x 4 / 96 / 8 GB/s = 6.144 us
  //   loop:  2 x 128 x 128 x 2048 / 0.5 TFLOP/s              = 134.217728 us
  //   reduce: 192 x 1536 x (4 x 4 + 2) / 0.8 TB/s             = 6.63552 us   -> 146.997248 us
  // (unsplit: one wave of 2 x 128 x 128 x 8192 / 0.5 TFLOP/s = 536.9 us; 128 x 256 with S = 8:
  // 96 tiles of 2 x 128 x 256 x 1024 / 0.5 TFLOP/s = 134.2 us + a store of 4 x 192 x 1536 x 8 / 96
  // / 8 GB/s = 12.288 us and a reduction of 12.53 us: 159.1 us.)
  const GpuSpec g = test_gpu();
  const GemmShape fwd{1, 8192, 1536, 192};
  const GemmShape w = wgrad_shape(fwd);
  CHECK((w.m == 192 && w.n == 1536 && w.k == 8192));
  const GemmPlan p = plan_gemm(g, Dtype::kFp16, w);
  CHECK(p.tile_m == 128);
  CHECK(p.tile_n == 128);
  CHECK(p.split_k == 4);
  CHECK(p.tiles == 96);
  CHECK(p.waves == 1);
  CHECK(p.reduce_s == Approx(6.63552e-6));
  CHECK(p.compute_s == Approx(146.997248e-6));
}

TEST_CASE("a linear layer's backward is its dgrad and wgrad GEMMs", "[gemm_shape]") {
  // Forward Y[m x n] = X[m x k] W[k x n] with m 8192, n 2304, k 6144 (the 22B model's qkv at
  // TP 8): dX = dY W^T is 8192 x 6144 with inner 2304; dW = X^T dY is 6144 x 2304 with inner 8192.
  const GemmShape f{1, 8192, 2304, 6144};
  const GemmShape d = dgrad_shape(f), w = wgrad_shape(f);
  CHECK((d.m == 8192 && d.n == 6144 && d.k == 2304));
  CHECK((w.m == 6144 && w.n == 2304 && w.k == 8192));
  // The same 2 m n k FLOPs each; the backward op runs both, each a kernel with its overhead.
  const GpuSpec g = test_gpu();
  const TimeNs dg = gemm_duration_ns(g, Dtype::kFp16, f, GemmPass::kDgrad);
  const TimeNs wg = gemm_duration_ns(g, Dtype::kFp16, f, GemmPass::kWgrad);
  CHECK(dg == round_to_ns(plan_gemm(g, Dtype::kFp16, d).seconds()) + 2000);
  CHECK(wg == round_to_ns(plan_gemm(g, Dtype::kFp16, w).seconds()) + 2000);
  CHECK(gemm_duration_ns(g, Dtype::kFp16, f, GemmPass::kBackward) == dg + wg);
}

TEST_CASE("the memory floor binds when every SM streams a long k at low bandwidth",
          "[gemm_shape]") {
  // m = 12800, n = 128, k = 8192 on a GPU with 0.1 TB/s (0.08 achieved, 0.8 GB/s per SM).
  // 128 x 128 tiles: 100 x 1 = 100 tiles, one wave: store 2 B x 16384 / 0.8 GB/s = 40.96 us +
  // loop 2 x 128 x 128 x 8192 / 0.5 TFLOP/s = 536.870912 us = 577.83 us (the 128 x 256 tiles
  // compute 256 columns of a 128-wide output: 1.07 ms). Memory: A, B and C once,
  // 2 x (12800 x 8192 + 8192 x 128 + 12800 x 128) / 0.08 TB/s = 2.689 ms > compute: it binds.
  GpuSpec g = test_gpu();
  g.mem_bw_bytes_per_s = 0.1e12;
  const GemmPlan p = plan_gemm(g, Dtype::kFp16, GemmShape{1, 12800, 128, 8192});
  CHECK(p.tiles == 100);
  CHECK(p.waves == 1);
  CHECK(p.memory_s == Approx(2.0 * (12800.0 * 8192 + 8192.0 * 128 + 12800.0 * 128) / 0.08e12));
  CHECK(p.memory_s > p.compute_s);
  CHECK(p.seconds() == p.memory_s);
}

TEST_CASE("ops without a shape keep the efficiency curve", "[gemm_shape]") {
  const GpuSpec g = test_gpu();
  Op op;
  op.kind = OpKind::kCompute;
  op.compute_kind = ComputeKind::kGemm;
  op.dtype = Dtype::kFp16;
  op.flops = 2.0 * 8192 * 1536 * 192;
  op.bytes = 1000;
  // No shape: the curve (docs/cost-model.md, "Compute").
  CHECK(op_compute_ns(g, op) ==
        compute_duration_ns(g, ComputeKind::kGemm, Dtype::kFp16, op.flops, op.bytes));
  // With one: the shape model.
  op.gemm = GemmShape{1, 8192, 1536, 192};
  CHECK(op_compute_ns(g, op) == 133431 + 2000);
  // A GPU without an SM count (a custom GPU that leaves it 0) cannot tile: the curve again.
  GpuSpec no_sms = g;
  no_sms.sm_count = 0;
  CHECK(op_compute_ns(no_sms, op) ==
        compute_duration_ns(no_sms, ComputeKind::kGemm, Dtype::kFp16, op.flops, op.bytes));
  // Attention's batched GEMMs and convolutions keep their curves even with a shape.
  op.compute_kind = ComputeKind::kConv;
  CHECK(op_compute_ns(g, op) ==
        compute_duration_ns(g, ComputeKind::kConv, Dtype::kFp16, op.flops, op.bytes));
}
