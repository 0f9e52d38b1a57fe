// A scenario's "cluster" object given as JSON rather than a file (simrun replay's job cluster,
// docs/replay.md, "Collectives on another cluster"): validated by the scenario parser's own code,
// with "cluster.KEY=VALUE" overrides as parse_cluster_file takes them. Implemented in
// scenario_parser.cpp beside parse_cluster_file.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// `name` stands for the document in messages ("--set cluster.nodes" errors name the key).
ClusterSpec parse_cluster_document(const nlohmann::json& cluster, const std::string& name,
                                   const std::vector<std::string>& overrides = {},
                                   std::vector<std::string>* warnings = nullptr);

}  // namespace csim::core
