// simrun sweep over a replayed trace (docs/replay.md, "Sweeping a replay"): the grid's --set
// values are replay what-ifs (cluster.gpu, replay.dp_scale, cluster.gpus_per_node, host.gil ...),
// each variant one simrun replay of the traces; a table of the replayed step per variant.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace csim::app {

// A folder, a *.json.gz file or a *.json file whose first 64 KiB hold "traceEvents": a trace
// source, not a scenario.
bool is_trace_source(const std::string& path);

struct ReplaySweepArgs {
  std::string source;  // trace file or folder
  std::vector<std::string> grid, base_sets;
  std::size_t random_n = 0, max_variants = 1000000;
  std::uint64_t seed = 1;
  int top = 10;
  std::string results_path;  // -o: CSV, one row per variant
};

int replay_sweep(const ReplaySweepArgs& a, std::ostream& out, std::ostream& err);

}  // namespace csim::app
