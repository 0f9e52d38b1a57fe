// Compute cost model (docs/cost-model.md, "Compute"):
//   duration = max(FLOPs / (peak(dtype) * efficiency(kind, FLOPs)), bytes / (mem_bw *
//   mem_bw_efficiency))
//              + kernel_overhead
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

double efficiency(const EfficiencyCurve& curve, double flops);
// max_efficiency > 0 replaces the kind curve's max_efficiency (Op::max_efficiency: a fused
// attention kernel's own figure, docs/attention.md, "Efficiency"); its half_flops still applies.
TimeNs compute_duration_ns(const GpuSpec& gpu, ComputeKind kind, Dtype dtype, double flops,
                           Bytes bytes, double max_efficiency = 0);

// A kCompute op's kernel time: Op::fixed_ns when set (a kernel replayed from a profiler trace at
// its measured duration, docs/replay.md, "Durations"); from its GEMM shape when it has one
// (docs/cost-model.md, "GEMM shape"; core/cost/gemm_shape_cost.hpp), else compute_duration_ns of
// its FLOPs and bytes.
TimeNs op_compute_ns(const GpuSpec& gpu, const Op& op);

// op_compute_ns on one GPU type, remembered: a direct-mapped table of the last kernel seen in each
// of 4,096 slots (by a hash of its FLOPs, bytes, kind, dtype and GEMM pass), compared on every
// field the cost reads. A layer's kernel recurs for every micro-batch and rank, so both the block
// path and the op-level simulator look most kernels up instead of costing them again; the value is
// the same.
class OpComputeMemo {
 public:
  OpComputeMemo() : e_(kSlots) {}
  TimeNs get(const GpuSpec& g, const Op& op) {
    if (op.fixed_ns >= 0) return op.fixed_ns;  // a measured kernel (op_compute_ns)
    std::uint64_t fb = 0;
    std::memcpy(&fb, &op.flops, sizeof fb);
    const int kind = static_cast<int>(op.compute_kind) * 16 + static_cast<int>(op.dtype);
    std::uint64_t h = fb * 0x9E3779B97F4A7C15ull ^
                      static_cast<std::uint64_t>(op.bytes) * 0xC2B2AE3D27D4EB4Full ^
                      static_cast<std::uint64_t>(kind) ^
                      static_cast<std::uint64_t>(op.gemm_pass) * 0x165667B19E3779F9ull;
    Entry& x = e_[(h ^ (h >> 29)) & (kSlots - 1)];
    if (x.flops != op.flops || x.bytes != op.bytes || x.kind != kind ||
        x.max_efficiency != op.max_efficiency || !same(x.gemm, op.gemm) || x.pass != op.gemm_pass) {
      x = {
          op.flops, op.bytes, kind, op.max_efficiency, op.gemm, op.gemm_pass, op_compute_ns(g, op)};
    }
    return x.d;
  }

 private:
  static constexpr std::size_t kSlots = 4096;  // a power of two
  struct Entry {
    double flops = -1;
    Bytes bytes = -1;
    int kind = -1;
    double max_efficiency = 0;
    GemmShape gemm;
    GemmPass pass = GemmPass::kForward;
    TimeNs d = 0;
  };
  static bool same(const GemmShape& a, const GemmShape& b) {
    return a.batch == b.batch && a.m == b.m && a.n == b.n && a.k == b.k;
  }
  std::vector<Entry> e_;  // 4,096 x 72 bytes: on the heap, not in the caller's frame
};

}  // namespace csim::core
