// Flows sharing directed links by max-min fairness (docs/cost-model.md, "Link sharing").
// Rates are recomputed (progressive filling) whenever a flow starts or ends; the caller advances
// time, asks for the next completion and is told which flows finished.
#pragma once

#include <cstdint>
#include <vector>

#include "core/topology.hpp"
#include "core/units.hpp"

namespace csim::engine {

using FlowId = std::int64_t;

class FlowNetwork {
 public:
  explicit FlowNetwork(const std::vector<core::Link>& links);

  // Starts a flow at `now_ns` over `route` (link ids) carrying `bytes`; `rate_cap` 0 = none.
  // An empty route with no cap completes at once (next_completion_ns() == now).
  FlowId start(TimeNs now_ns, const std::vector<core::LinkId>& route, double bytes, double rate_cap,
               std::int64_t tag);

  // Earliest time a flow finishes at current rates; -1 when no flow is active.
  TimeNs next_completion_ns() const;

  // Advances to `now_ns` (>= last time) and returns the tags of flows finished by then,
  // in start order. Rates are recomputed if any finished.
  std::vector<std::int64_t> advance(TimeNs now_ns);

  std::size_t active() const;
  double rate_of(FlowId id) const;  // bytes/s, for tests

 private:
  struct Flow {
    std::vector<core::LinkId> route;
    double remaining = 0, rate = 0, cap = 0;
    std::int64_t tag = 0;
    bool active = false;
  };
  std::vector<double> capacity_;
  std::vector<Flow> flows_;
  std::vector<FlowId> active_ids_;  // in start order
  TimeNs last_ns_ = 0;
  void recompute_rates();
};

}  // namespace csim::engine
