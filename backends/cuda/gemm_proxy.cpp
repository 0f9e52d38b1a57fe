#include "backends/cuda/gemm_proxy.hpp"

#include <algorithm>
#include <cmath>

#include "backends/cuda/cuda_plan.hpp"

namespace csim::cuda {

std::vector<GemmShape> plan_gemm_shapes(double flops, int elem_bytes, Bytes cap_bytes) {
  if (!(flops > 0)) return {};
  const std::int64_t n_max = max_gemm_size(elem_bytes, cap_bytes);
  const double edge = std::cbrt(flops / 2.0);
  const std::int64_t n = std::clamp<std::int64_t>(
      std::llround(edge / static_cast<double>(kGemmAlign)) * kGemmAlign, kGemmAlign, n_max);
  // A (n x k) and B (n x k, stored transposed) each within the cap.
  const std::int64_t k_max = std::max<std::int64_t>(1, cap_bytes / (n * elem_bytes));
  const double k_total = flops / (2.0 * static_cast<double>(n) * static_cast<double>(n));
  const auto count =
      k_total <= static_cast<double>(k_max)
          ? std::int64_t{1}
          : static_cast<std::int64_t>(std::ceil(k_total / static_cast<double>(k_max)));
  // k_total / count <= k_max, so its rounding stays within k_max too.
  const std::int64_t k =
      std::max<std::int64_t>(1, std::llround(k_total / static_cast<double>(count)));
  return std::vector<GemmShape>(static_cast<std::size_t>(count), GemmShape{n, n, k});
}

double executed_flops(const std::vector<GemmShape>& shapes) {
  double f = 0;
  for (const GemmShape& s : shapes) f += s.flops();
  return f;
}

void fill_operand_words(std::uint16_t* words, std::size_t count, std::uint64_t seed) {
  std::uint64_t state = seed;
  const auto next = [&state] {  // splitmix64
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  // Keep the sign (bit 15) and bits 10..0 random; force bits 14..11 to 0111.
  constexpr std::uint16_t kRandomBits = 0x87FF;
  constexpr std::uint16_t kExponentBits = 0x3800;
  for (std::size_t i = 0; i < count; i += 4) {
    std::uint64_t r = next();
    for (std::size_t j = i; j < std::min(count, i + 4); ++j, r >>= 16) {
      words[j] = static_cast<std::uint16_t>((r & kRandomBits) | kExponentBits);
    }
  }
}

}  // namespace csim::cuda
