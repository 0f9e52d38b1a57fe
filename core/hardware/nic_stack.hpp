// The inter-node stacks NCCL runs over: per stack, the NIC hop's latency and the fraction of the
// NIC's line rate NCCL sustains (docs/scenario.md, "cluster.nic"; docs/cost-model.md,
// "Topology"). The latency is the alpha of one NIC link (NCCL's proxy hand-off, the network write
// and its completion) as LinkParams::nic_alpha_ns; the efficiency scales the NIC link's capacity
// as LinkParams::nic_efficiency.
#pragma once

#include <string>

#include "core/scenario/scenario.hpp"

namespace csim::core {

struct NicStackInfo {
  NicStack stack = NicStack::kInfiniband;
  const char* name = "";          // the scenario's spelling: "infiniband", "roce", ...
  double latency_us = 0;          // catalogue latency of one NIC hop
  double efficiency = 0;          // catalogue fraction of the NIC's line rate, (0, 1]
  bool latency_measured = false;  // false: no published measurement sets it (latency_source)
  bool efficiency_measured = false;
  const char* latency_source = "";     // the calibration case it was fitted to, or why not
  const char* efficiency_source = "";  //
};

// Every stack, in enum order.
const NicStackInfo* nic_stacks(int* count);
const NicStackInfo& nic_stack_info(NicStack s);
// "infiniband" -> kInfiniband; false for an unknown name.
bool parse_nic_stack(const std::string& name, NicStack* out);
// The NIC hop latency a cluster runs with: cluster.nic.latency_ns when set, else its stack's.
double nic_latency_ns(const NicSpec& nic);
// The fraction of the NIC line rate a cluster's NIC links sustain: cluster.nic.efficiency when
// set, else its stack's.
double nic_efficiency(const NicSpec& nic);

}  // namespace csim::core
