// Units used everywhere inside ClusterSim.
//
// Time is int64 nanoseconds (TimeNs). Byte counts are int64 (Bytes). Rates carry their unit in the
// name (bytes_per_s, flops_per_s). Conversions to microseconds happen only at the Chrome-trace
// boundary (profiler/), and to seconds only in printed summaries.
#pragma once

#include <cmath>
#include <cstdint>

namespace csim {

using TimeNs = std::int64_t;  // nanoseconds
using Bytes = std::int64_t;   // bytes

inline constexpr TimeNs kNsPerUs = 1000;
inline constexpr TimeNs kNsPerMs = 1000 * 1000;
inline constexpr TimeNs kNsPerS = 1000 * 1000 * 1000;
inline constexpr Bytes kKiB = 1024;
inline constexpr Bytes kMiB = 1024 * 1024;
inline constexpr Bytes kGiB = 1024LL * 1024 * 1024;
inline constexpr double kGB = 1e9;  // decimal GB, as NVIDIA and nccl-tests quote bandwidths

// The single place where a duration computed in floating point becomes integer nanoseconds
// (docs/cost-model.md, "Determinism"). Rounds half away from zero; negative inputs are clamped.
inline TimeNs round_to_ns(double seconds) {
  if (!(seconds > 0.0)) return 0;
  return static_cast<TimeNs>(std::llround(seconds * 1e9));
}

inline double ns_to_s(TimeNs t) { return static_cast<double>(t) * 1e-9; }
inline TimeNs us_to_ns(double us) { return round_to_ns(us * 1e-6); }

}  // namespace csim
