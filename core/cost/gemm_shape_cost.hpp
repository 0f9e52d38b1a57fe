// GEMM time from its shape (docs/cost-model.md, "GEMM shape"): output tiles, wave quantisation
// over the SMs, split-K for too few tiles, a per-tile minimum (the epilogue's store), and the
// memory-bound floor.
#pragma once

#include <cstdint>

#include "core/scenario/scenario.hpp"
#include "core/units.hpp"

namespace csim::core {

// One GEMM kernel's plan: the thread-block tile picked, how many tiles and waves, and the two
// roofline terms (seconds, without kernel_overhead_ns).
struct GemmPlan {
  int tile_m = 0, tile_n = 0;
  int split_k = 1;         // k split into this many slices (1: none)
  std::int64_t tiles = 0;  // batch * ceil(m / tile_m) * ceil(n / tile_n) * split_k
  std::int64_t waves = 0;  // ceil(tiles / sm_count)
  double tile_s = 0;       // one tile: epilogue store + main loop
  double reduce_s = 0;     // split-K: the partial sums' reduction; 0 unsplit
  double compute_s = 0;    // waves * tile_s + reduce_s
  double memory_s = 0;     // bytes of A, B, C over the achieved HBM bandwidth
  double seconds() const { return compute_s > memory_s ? compute_s : memory_s; }
};

// The fastest of the architecture's tile and split-K candidates for C[m x n] = A[m x k] B[k x n] (x
// batch) in `dtype`. max_efficiency > 0 replaces the kind curve's asymptote (Op::max_efficiency).
GemmPlan plan_gemm(const GpuSpec& gpu, Dtype dtype, const GemmShape& shape,
                   double max_efficiency = 0);

// The shapes of a linear layer's backward products (forward C[m x n] = A[m x k] B[k x n]):
// dgrad m x k with inner n, wgrad k x n with inner m.
GemmShape dgrad_shape(const GemmShape& fwd);
GemmShape wgrad_shape(const GemmShape& fwd);

// Duration of the op's products, each a kernel with its own kernel_overhead_ns.
TimeNs gemm_duration_ns(const GpuSpec& gpu, Dtype dtype, const GemmShape& fwd, GemmPass pass,
                        double max_efficiency = 0);

}  // namespace csim::core
