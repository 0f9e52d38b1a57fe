// Fits of the calibration (docs/calibration.md, "Fits"): pure functions from measured points to
// the cost model's constants. No I/O, no device: unit-tested with synthetic points.
#pragma once

#include <vector>

#include "core/program/program.hpp"

namespace csim::calibration {

// y = intercept + slope * x, by weighted least squares (docs/calibration.md, "Weighted line"):
// minimises sum w_i (y_i - intercept - slope x_i)^2.
struct LineFit {
  double intercept = 0;     // a
  double slope = 0;         // b
  double residual_rms = 0;  // sqrt(mean(((y_i - yhat_i) / y_i)^2)): relative, unitless
  int points = 0;           // points used
  bool ok = false;          // false: fewer than 2 distinct x, or a non-positive weight sum
};
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y,
                 const std::vector<double>& w);

// One GEMM of the series: its FLOPs and its compute time (measured duration minus the kernel
// overhead, docs/calibration.md "GEMM curve"), in seconds.
struct GemmPoint {
  double flops = 0;
  double compute_s = 0;
};

// The efficiency curve of docs/cost-model.md "Compute", efficiency(F) = max * F / (F + H), fitted
// as the line 1/eff = 1/max + (H/max) * (1/F) in x = 1/F, each point weighted 1/y^2 (relative
// errors; docs/calibration.md, "GEMM curve"). `peak_flops_per_s` is the dtype's dense peak; H is
// returned at that dtype (the profile rescales it to peak_max, as the cost model states it).
struct GemmFit {
  double max_efficiency = 0;  // 1 / intercept
  double half_flops = 0;      // slope / intercept, FLOPs, at this dtype's peak
  double residual_rms = 0;    // relative RMS residual of 1/eff (= of the compute time)
  int points = 0;
  bool ok = false;
};
GemmFit fit_gemm_curve(const std::vector<GemmPoint>& points, double peak_flops_per_s);

// A transfer series t = latency + bytes / bandwidth (docs/calibration.md, "Bandwidth line"),
// weighted 1/t^2 like the GEMM curve.
struct BandwidthFit {
  double bytes_per_s = 0;   // 1 / slope
  double latency_s = 0;     // intercept (may come out slightly negative with noise)
  double residual_rms = 0;  // relative RMS residual of the time
  int points = 0;
  bool ok = false;
};
BandwidthFit fit_bandwidth(const std::vector<double>& bytes, const std::vector<double>& seconds);

// nccl-tests' definitions (doc/PERFORMANCE.md; docs/calibration.md "Collectives"):
//   algbw = S / t,  busbw = algbw * factor, factor 2(n-1)/n for all_reduce, (n-1)/n for
//   all_gather and reduce_scatter (core::busbw_factor).
double algbw_bytes_per_s(double bytes, double seconds);
double busbw_bytes_per_s(core::CollectiveKind kind, int ranks, double bytes, double seconds);

// Median of a non-empty sample (mean of the two middle values for an even count).
double median(std::vector<double> v);

}  // namespace csim::calibration
