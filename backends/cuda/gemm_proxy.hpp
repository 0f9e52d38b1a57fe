// The cuBLAS GEMMs that stand in for a compute op's FLOPs (docs/real-execution.md, "CUDA
// runtime"), and the values their operands hold. No CUDA call here: unit-tested without a GPU.
//
// Shape: C (m x n) = A (m x k) * B^T, B stored n x k (cuBLAS N, T), so the leading dimensions are
// m and n, both multiples of kGemmAlign (tensor-core tiles, 16-byte aligned columns), and k, the
// one free dimension, never is one. m = n = cbrt(flops / 2) rounded to kGemmAlign, then
//   k = round(flops / (2 m n)), at least 1,
// so the executed 2 m n k FLOPs differ from the op's by at most 0.5 / k: under 1 % once k >= 50,
// i.e. for every op of 2 * 64 * 64 * 50 = 409,600 FLOPs or more. Rounding n alone (a square
// n^3 GEMM) missed by up to +49 % / -37 % near n = 224, where cbrt lands half-way between two
// multiples of 64 (test_cuda_runtime.cpp works the numbers).
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

#include "core/units.hpp"

namespace csim::cuda {

struct GemmShape {
  std::int64_t m = 0;  // rows of A and C (a multiple of kGemmAlign)
  std::int64_t n = 0;  // columns of C, rows of stored B (a multiple of kGemmAlign)
  std::int64_t k = 0;  // the reduction dimension (>= 1, any integer)
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  auto operator<=>(const GemmShape&) const = default;
};

// The GEMMs that stand in for `flops` with operands of `elem_bytes` elements, none larger than
// `cap_bytes` (m k, n k and m n elements): one GEMM as above when its A and B fit; otherwise
// (n capped at the largest aligned square that fits) as many equal GEMMs of the largest k that
// fits as it takes, k = round(flops / (2 m n g)) for g GEMMs. Empty for flops <= 0.
std::vector<GemmShape> plan_gemm_shapes(double flops, int elem_bytes, Bytes cap_bytes);

// Executed FLOPs of `shapes` (what plan_gemm_shapes ran for an op).
double executed_flops(const std::vector<GemmShape>& shapes);

// Random 16-bit words for the GEMM operands, finite and normal in every type the buffers are read
// as: as fp16 +-[0.5, 2), as bf16 +-[2^-15, 1), and two of them as one fp32 (its high word is
// the bf16 one) +-[2^-15, 1). Bits: random sign, bits 14..11 = 0111, bit 10 random, bits 9..0
// random; 0111x in fp16's 5-bit exponent is 14 or 15, and 0111xxxx in bf16's 8-bit exponent
// 112..127, both normal. Constant bytes would draw less power and run faster than real data.
// Deterministic in `seed` (splitmix64).
void fill_operand_words(std::uint16_t* words, std::size_t count, std::uint64_t seed);

}  // namespace csim::cuda
