// The inter-node stacks NCCL runs over and their NIC-hop latency (docs/scenario.md,
// "cluster.nic"; docs/cost-model.md, "Topology"). The latency is the alpha of one NIC link: NCCL's
// proxy hand-off, the network write and its completion, as LinkParams::nic_alpha_ns.
#pragma once

#include <string>

#include "core/scenario.hpp"

namespace csim::core {

struct NicStackInfo {
  NicStack stack = NicStack::kInfiniband;
  const char* name = "";  // the scenario's spelling: "infiniband", "roce", ...
  double latency_us = 0;  // catalogue latency of one NIC hop
  bool measured = false;  // false: no calibration case measures this stack (see `source`)
  const char* source = "";
};

// Every stack, in enum order.
const NicStackInfo* nic_stacks(int* count);
const NicStackInfo& nic_stack_info(NicStack s);
// "infiniband" -> kInfiniband; false for an unknown name.
bool parse_nic_stack(const std::string& name, NicStack* out);
// The NIC hop latency a cluster runs with: cluster.nic.latency_ns when set, else its stack's.
double nic_latency_ns(const NicSpec& nic);

}  // namespace csim::core
