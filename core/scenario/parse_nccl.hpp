// The scenario's "nccl" forcing checked against the cluster: NCCL 2.2x's algorithm gates
// (docs/scenario.md, "nccl"; docs/cost-model.md, "Algorithm gates"). Internal to core/ (the
// scenario parser calls it).
#pragma once

#include <string>

#include "core/scenario/parse_context.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core::parse {

// Why the cluster cannot run NCCL algorithm `algo` (kNvls, kCollnet, kNvlsTree, kPat; the others
// always can), or empty: NVLS needs sm_90+ GPUs on NVSwitch and, across nodes, CollNet; CollNet
// needs two or more nodes whose fabric has SHARP switches; NVLSTree needs NVLS's GPUs and two or
// more nodes of two or more GPUs; PAT needs one GPU per node on two or more nodes (sm_60+).
std::string nccl_algo_gate(CollectiveAlgo algo, const ClusterSpec& c);

// Exit 2 at `path` (nccl.algo) when the forced algorithm is gated off on sc.cluster.
void check_nccl_algo(Ctx& ctx, const std::string& path, const Scenario& sc);

}  // namespace csim::core::parse
