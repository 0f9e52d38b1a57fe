// Helpers shared by the collective cost tests (test_collective_cost.cpp, test_nccl_channels.cpp,
// test_host_staging.cpp): a plan's flows run alone through the flow network, and rank lists.
#pragma once

#include <vector>

#include "core/cost/collective_cost.hpp"
#include "core/engine/flow_network.hpp"
#include "core/hardware/topology.hpp"

namespace csim::test {

// Runs a plan's flows alone through the flow network: its latency, then all its flows at once;
// returns when the last one ends.
inline TimeNs simulate(const core::Topology& t, const core::TransferPlan& plan) {
  engine::FlowNetwork net(t.links());
  std::vector<engine::FlowStart> batch;
  for (const core::FlowSpec& f : plan.flows)
    batch.push_back({t.route(f.src, f.dst), f.bytes, f.rate_cap_bytes_per_s, 0});
  net.start_batch(plan.latency_ns, batch);
  TimeNs end = plan.latency_ns;
  while (net.next_completion_ns() >= 0) {
    end = net.next_completion_ns();
    net.advance(end);
  }
  return end;
}

// Ranks 0 .. n-1.
inline std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

}  // namespace csim::test
