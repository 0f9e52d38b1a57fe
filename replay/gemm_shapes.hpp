// GEMM shapes from the profiler's "Input Dims" (record_shapes=True): the shape of the matrix
// product a CPU op asked for, which its GEMM kernel computes (docs/replay.md, "Another GPU").
//   aten::mm       [[M,K],[K,N]]
//   aten::addmm    [[N] or [M,N],[M,K],[K,N], ...]
//   aten::bmm      [[B,M,K],[B,K,N]]
//   aten::baddbmm  [[B,M,N],[B,M,K],[B,K,N], ...]
//   aten::linear   [[..., K],[N,K], ...]   M = the product of the leading dimensions
#pragma once

#include <string>

#include "core/scenario/scenario.hpp"

namespace csim::replay {

// True when `op` is one of the ops above (a GEMM's CPU op).
bool is_gemm_op(const std::string& op);

// The shape, or false when the op is not one of the above or its dims do not fit it.
bool gemm_shape_of(const std::string& op, const std::string& input_dims, core::GemmShape* out);

}  // namespace csim::replay
