// Calibration fits (docs/calibration.md, "Fits").
#include "calibration/fit.hpp"

#include <algorithm>
#include <cmath>

#include "core/cost/collective_cost.hpp"
#include "core/error.hpp"

namespace csim::calibration {

// docs/calibration.md, "Weighted line". Centred form: with weighted means xm, ym,
//   slope = sum w (x - xm)(y - ym) / sum w (x - xm)^2,  intercept = ym - slope * xm,
// which keeps the precision when x spans many decades (1/F from 1e-13 to 1e-7).
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y,
                 const std::vector<double>& w) {
  CSIM_ASSERT(x.size() == y.size() && x.size() == w.size());
  LineFit f;
  double sw = 0, sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sw += w[i];
    sx += w[i] * x[i];
    sy += w[i] * y[i];
  }
  f.points = static_cast<int>(x.size());
  if (x.size() < 2 || !(sw > 0)) return f;
  const double xm = sx / sw, ym = sy / sw;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += w[i] * (x[i] - xm) * (x[i] - xm);
    sxy += w[i] * (x[i] - xm) * (y[i] - ym);
  }
  if (!(sxx > 0)) return f;  // every x the same: no slope
  f.slope = sxy / sxx;
  f.intercept = ym - f.slope * xm;
  double rel2 = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] != 0 ? (y[i] - (f.intercept + f.slope * x[i])) / y[i] : 0.0;
    rel2 += r * r;
  }
  f.residual_rms = std::sqrt(rel2 / static_cast<double>(x.size()));
  f.ok = true;
  return f;
}

// docs/calibration.md, "GEMM curve":
//   eff_i = F_i / (peak * t_i),  y_i = 1/eff_i,  x_i = 1/F_i,  w_i = 1/y_i^2
//   y = 1/max + (H/max) x   =>   max = 1/intercept,  H = slope / intercept.
GemmFit fit_gemm_curve(const std::vector<GemmPoint>& points, double peak_flops_per_s) {
  CSIM_ASSERT(peak_flops_per_s > 0);
  std::vector<double> x, y, w;
  for (const GemmPoint& p : points) {
    if (!(p.flops > 0) || !(p.compute_s > 0)) continue;  // no compute time left: not usable
    const double inv_eff = peak_flops_per_s * p.compute_s / p.flops;
    x.push_back(1.0 / p.flops);
    y.push_back(inv_eff);
    w.push_back(1.0 / (inv_eff * inv_eff));
  }
  const LineFit line = fit_line(x, y, w);
  GemmFit g;
  g.points = line.points;
  g.residual_rms = line.residual_rms;
  if (!line.ok || !(line.intercept > 0)) return g;
  g.max_efficiency = 1.0 / line.intercept;
  g.half_flops = line.slope / line.intercept;
  g.ok = true;
  return g;
}

// docs/calibration.md, "Bandwidth line": t = latency + S / B; x = S, y = t, w = 1/t^2.
BandwidthFit fit_bandwidth(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  CSIM_ASSERT(bytes.size() == seconds.size());
  std::vector<double> x, y, w;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (!(bytes[i] > 0) || !(seconds[i] > 0)) continue;
    x.push_back(bytes[i]);
    y.push_back(seconds[i]);
    w.push_back(1.0 / (seconds[i] * seconds[i]));
  }
  const LineFit line = fit_line(x, y, w);
  BandwidthFit b;
  b.points = line.points;
  b.residual_rms = line.residual_rms;
  if (!line.ok || !(line.slope > 0)) return b;
  b.bytes_per_s = 1.0 / line.slope;
  b.latency_s = line.intercept;
  b.ok = true;
  return b;
}

double algbw_bytes_per_s(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds : 0.0;
}

double busbw_bytes_per_s(core::CollectiveKind kind, int ranks, double bytes, double seconds) {
  return algbw_bytes_per_s(bytes, seconds) * core::busbw_factor(kind, ranks);
}

double median(std::vector<double> v) {
  CSIM_ASSERT(!v.empty());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace csim::calibration
