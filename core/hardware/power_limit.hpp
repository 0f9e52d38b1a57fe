// A GPU's board power limit and what a cap below it does to its compute throughput
// (docs/cost-model.md, "Power limit"; docs/scenario.md, "cluster.gpu_power_limit_w"). The catalog
// holds each GPU's datasheet TDP and, where a published measurement exists, the sustained clock
// under lower caps; the cost model scales every kernel's compute term by the resulting factor.
#pragma once

#include <string>
#include <vector>

namespace csim::core {

// One published measurement: the sustained clock (or throughput) a GPU keeps under a board power
// cap, relative to what it keeps at its TDP.
struct PowerClockPoint {
  double power_w = 0;      // the cap
  double clock_ratio = 1;  // sustained clock at the cap / at the TDP, (0, 1]
};

struct PowerProfile {
  double tdp_w = 0;        // datasheet maximum board power; 0 = unknown (a custom GPU)
  std::string tdp_source;  // the datasheet
  // Published (cap, clock ratio) points, caps below tdp_w, any order; empty = none published.
  std::vector<PowerClockPoint> clock;
  std::string clock_source;  // where the points come from, or why there are none
};

// The compute-throughput factor of a cap (docs/cost-model.md, "Power limit"):
//   cap >= tdp or no cap (0)            -> 1
//   published points P_i < tdp (r_i)    -> piecewise linear in the cap through (P_i, r_i) and
//                                          (tdp, 1), held at the lowest point's ratio below it
//   no published point                  -> 1 (placeholder: the cap is not modelled)
double power_limit_clock_factor(const PowerProfile& p, double cap_w);

// True when the factor at `cap_w` rests on a published measurement: no cap, a cap at or above the
// TDP, or a cap with published points.
bool power_limit_modelled(const PowerProfile& p, double cap_w);

}  // namespace csim::core
