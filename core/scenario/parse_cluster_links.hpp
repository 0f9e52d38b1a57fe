// cluster.nic and cluster.p2p (docs/scenario.md, "cluster.nic", "cluster.p2p"): the NICs' stack
// and hop latency, and whether the GPUs of a node talk peer-to-peer. Internal to core/ (the
// scenario parser calls it from parse_cluster).
#pragma once

#include "core/scenario/parse_context.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core::parse {

// Reads "nic" ({"stack", "latency_us"}) and "p2p" from the cluster object `o` into `c`.
// latency_ns is always set: the given latency_us, else the stack's catalogue latency (with a
// warning for a stack no calibration case measures).
void parse_cluster_links(Ctx& ctx, const Obj& o, ClusterSpec& c);

}  // namespace csim::core::parse
