// Roofline compute cost (docs/cost-model.md, "Compute"); expected values derived in comments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "core/cost/compute_cost.hpp"
#include "core/hardware/power_limit.hpp"

using namespace csim;
using namespace csim::core;

namespace {

GpuSpec test_gpu() {
  GpuSpec g;
  g.name = "test";
  g.peak_fp32_flops_per_s = 20e12;
  g.peak_tf32_flops_per_s = 0;
  g.peak_fp16_flops_per_s = 100e12;
  g.peak_bf16_flops_per_s = 100e12;
  g.mem_bw_bytes_per_s = 1e12;
  g.mem_bw_efficiency = 0.8;
  g.kernel_overhead_ns = 2000;
  for (auto& c : g.efficiency) c = EfficiencyCurve{0.8, 1e9, "test"};
  g.efficiency[static_cast<int>(ComputeKind::kElementwise)] = EfficiencyCurve{0.5, 0, "test"};
  return g;
}

}  // namespace

TEST_CASE("efficiency curve saturates at max_efficiency", "[compute]") {
  const EfficiencyCurve c{0.8, 1e9, "test"};
  // efficiency(F) = 0.8 * F / (F + 1e9): F = 1e9 -> 0.4; F = 3e9 -> 0.6; F -> inf -> 0.8
  CHECK(efficiency(c, 1e9) == Approx(0.4));
  CHECK(efficiency(c, 3e9) == Approx(0.6));
  CHECK(efficiency(c, 1e18) == Approx(0.8).epsilon(1e-6));
  // no work, no efficiency (the duration formula never divides by it)
  CHECK(efficiency(c, 0) == 0.0);
  // half_flops = 0: flat curve
  CHECK(efficiency(EfficiencyCurve{0.5, 0, ""}, 1.0) == Approx(0.5));
}

TEST_CASE("compute-bound kernel", "[compute]") {
  const GpuSpec g = test_gpu();
  // F = 3e12 fp16 GEMM: F / (peak * 0.8 * F / (F + half)) = (F + half) / (peak * 0.8)
  //   = 3.001e12 / 8e13 = 0.0375125 s = 37,512,500 ns; memory 1e6 / 8e11 = 1.25 us is smaller;
  //   + 2,000 ns overhead = 37,514,500 ns
  CHECK(compute_duration_ns(g, ComputeKind::kGemm, Dtype::kFp16, 3e12, 1000000) == 37514500);
  // fp32 peak is 5x lower and half_flops (stated at the fp16 peak, the GPU's highest) scales with
  // it to 1e9 / 5 = 2e8: (3e12 + 2e8) / (2e13 * 0.8) = 0.1875125 s + 2 us = 187,514,500 ns
  CHECK(compute_duration_ns(g, ComputeKind::kGemm, Dtype::kFp32, 3e12, 0) == 187514500);
}

TEST_CASE("power limit: piecewise-linear clock factor", "[compute][power]") {
  // docs/cost-model.md, "Power limit", with made-up points (no published one is in the catalog):
  // TDP 700 W, (300 W, 0.6), (500 W, 0.9); knots (300, 0.6), (500, 0.9), (700, 1).
  PowerProfile p;
  p.tdp_w = 700;
  p.clock = {{500, 0.9}, {300, 0.6}};              // any order
  CHECK(power_limit_clock_factor(p, 0) == 1.0);    // no cap
  CHECK(power_limit_clock_factor(p, 700) == 1.0);  // the TDP
  CHECK(power_limit_clock_factor(p, 800) == 1.0);  // above it (the parser refuses it)
  // 600 W: 0.9 + (600 - 500) / (700 - 500) x (1 - 0.9) = 0.95
  CHECK(power_limit_clock_factor(p, 600) == Approx(0.95));
  // 400 W: 0.6 + (400 - 300) / (500 - 300) x (0.9 - 0.6) = 0.75
  CHECK(power_limit_clock_factor(p, 400) == Approx(0.75));
  CHECK(power_limit_clock_factor(p, 500) == Approx(0.9));
  CHECK(power_limit_clock_factor(p, 200) == Approx(0.6));  // held below the lowest point
  CHECK(power_limit_modelled(p, 400));
  // No published point: the placeholder 1 at any cap, and not modelled below the TDP.
  PowerProfile none;
  none.tdp_w = 700;
  CHECK(power_limit_clock_factor(none, 500) == 1.0);
  CHECK_FALSE(power_limit_modelled(none, 500));
  CHECK(power_limit_modelled(none, 700));
  CHECK(power_limit_modelled(none, 0));
}

TEST_CASE("power limit: the clock factor slows the compute term, not the memory term",
          "[compute][power]") {
  GpuSpec g = test_gpu();
  g.compute_clock_factor = 0.75;
  // The compute-bound kernel above: (3e12 + 1e9) / (0.75 x 1e14 x 0.8) = 0.0500167 s
  //   = 50,016,667 ns + 2,000 ns overhead = 50,018,667 ns (37,514,500 at factor 1)
  CHECK(compute_duration_ns(g, ComputeKind::kGemm, Dtype::kFp16, 3e12, 1000000) == 50018667);
  // The memory-bound one: 8e8 B / 8e11 B/s = 1 ms still binds (compute 12.5 / 0.75 = 16.7 us):
  //   1,002,000 ns as at factor 1
  CHECK(compute_duration_ns(g, ComputeKind::kGemm, Dtype::kFp16, 1e6, 800000000) == 1002000);
}

TEST_CASE("memory-bound kernel", "[compute]") {
  const GpuSpec g = test_gpu();
  // bytes 8e8 / (1e12 * 0.8) = 1e-3 s = 1,000,000 ns; compute (1e6 + 1e9) / 8e13 = 12.5 us;
  // max = 1 ms, + 2,000 ns = 1,002,000 ns
  CHECK(compute_duration_ns(g, ComputeKind::kGemm, Dtype::kFp16, 1e6, 800000000) == 1002000);
  // elementwise curve is flat at 0.5: 1e9 FLOPs / (1e14 * 0.5) = 20 us vs 4e7 B / 8e11 = 50 us
  //   -> 50,000 + 2,000 = 52,000 ns
  CHECK(compute_duration_ns(g, ComputeKind::kElementwise, Dtype::kFp16, 1e9, 40000000) == 52000);
}

TEST_CASE("empty kernel costs the launch overhead only", "[compute]") {
  const GpuSpec g = test_gpu();
  // max(0, 0) + 2,000 ns
  CHECK(compute_duration_ns(g, ComputeKind::kGemm, Dtype::kFp32, 0, 0) == 2000);
}

TEST_CASE("durations round to the nearest ns once", "[compute]") {
  GpuSpec g = test_gpu();
  g.kernel_overhead_ns = 0;
  // bytes 1 / 8e11 = 1.25 ps -> 0 ns; 2,000 B / 8e11 = 2.5 ns -> 3 ns (half away from zero)
  CHECK(compute_duration_ns(g, ComputeKind::kElementwise, Dtype::kFp32, 0, 1) == 0);
  CHECK(compute_duration_ns(g, ComputeKind::kElementwise, Dtype::kFp32, 0, 2000) == 3);
}

TEST_CASE("remembered kernel times are op_compute_ns's, slot collisions included", "[compute]") {
  // OpComputeMemo hashes FLOPs, bytes, kind, dtype and GEMM pass only: ops that differ in their
  // GEMM shape or fused-kernel efficiency alone share a slot, and a hit must still compare them.
  // Every op below is looked up in a shuffled order, three times over; each answer must be the
  // cost model's own.
  GpuSpec g = test_gpu();
  g.sm_count = 100;  // GEMM shapes are costed by waves of tiles (docs/cost-model.md, "GEMM shape")
  g.gemm_tile_efficiency = 0.5;
  std::vector<Op> ops;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 400; ++i) {
    Op op;
    op.kind = OpKind::kCompute;
    op.compute_kind = i % 3 == 0 ? ComputeKind::kElementwise : ComputeKind::kGemm;
    op.dtype = i % 2 == 0 ? Dtype::kBf16 : Dtype::kFp32;
    op.flops = static_cast<double>(rng() % 1000 + 1) * 1e9;
    op.bytes = static_cast<Bytes>(rng() % 1000 + 1) << 20;
    op.gemm_pass = static_cast<GemmPass>(i % 4);
    ops.push_back(op);
    Op shaped = op;  // the same hash, a GEMM shape
    shaped.gemm = GemmShape{1, 1024 * (i % 7 + 1), 4096, 2048};
    ops.push_back(shaped);
    Op other_shape = shaped;  // the same hash, another shape
    other_shape.gemm.k = 8192;
    ops.push_back(other_shape);
    Op fused = op;  // the same hash, its own efficiency
    fused.max_efficiency = 0.35;
    ops.push_back(fused);
  }
  OpComputeMemo memo;
  for (int round = 0; round < 3; ++round) {
    std::shuffle(ops.begin(), ops.end(), rng);
    for (const Op& op : ops) CHECK(memo.get(g, op) == op_compute_ns(g, op));
  }
}
