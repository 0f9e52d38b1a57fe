// The GEMM shape a layer's kernel runs on one rank (docs/cost-model.md, "GEMM shape"). Internal
// to core/lowering.
#pragma once

#include <cstdint>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// The layer's per-sample shape with m scaled by `samples` (and divided by ps.cp: a
// context-parallel rank's tokens), n split by ps.tp for column-parallel layers (and the
// vocabulary-parallel head) and k for row-parallel ones (Shoeybi et al. 2019, section 3), a routed
// expert's grouped GEMM on E / ep experts of ep times the tokens each under expert parallelism.
// Empty when the layer has no shape, or when `op_flops` (the kernel's FLOPs; the backward's are
// twice the forward's) is not the shape's 2 m n k: a lowering that splits the work some other way
// keeps the kind curve.
GemmShape rank_gemm_shape(const LayerSpec& l, std::int64_t samples, const ParallelSpec& ps,
                          double op_flops, bool backward);

}  // namespace csim::core
