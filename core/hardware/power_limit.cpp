// GPU power limit -> compute-throughput factor (core/hardware/power_limit.hpp; docs/cost-model.md,
// "Power limit").
#include "core/hardware/power_limit.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace csim::core {

double power_limit_clock_factor(const PowerProfile& p, double cap_w) {
  if (!(cap_w > 0) || !(p.tdp_w > 0) || cap_w >= p.tdp_w || p.clock.empty()) return 1.0;
  // Knots: the published points below the TDP in increasing power, then (tdp, 1).
  std::vector<PowerClockPoint> k;
  for (const PowerClockPoint& q : p.clock) {
    CSIM_ASSERT_MSG(q.power_w > 0 && q.clock_ratio > 0 && q.clock_ratio <= 1,
                    "a published power/clock point out of range");
    if (q.power_w < p.tdp_w) k.push_back(q);
  }
  if (k.empty()) return 1.0;
  std::sort(k.begin(), k.end(), [](const PowerClockPoint& a, const PowerClockPoint& b) {
    return a.power_w < b.power_w;
  });
  k.push_back({p.tdp_w, 1.0});
  if (cap_w <= k.front().power_w) return k.front().clock_ratio;  // held below the lowest point
  for (std::size_t i = 1; i < k.size(); ++i) {
    if (cap_w <= k[i].power_w) {
      const double t = (cap_w - k[i - 1].power_w) / (k[i].power_w - k[i - 1].power_w);
      return k[i - 1].clock_ratio + t * (k[i].clock_ratio - k[i - 1].clock_ratio);
    }
  }
  return 1.0;
}

bool power_limit_modelled(const PowerProfile& p, double cap_w) {
  return !(cap_w > 0) || (p.tdp_w > 0 && cap_w >= p.tdp_w) || !p.clock.empty();
}

}  // namespace csim::core
