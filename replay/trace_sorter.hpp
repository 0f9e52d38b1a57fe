// Stage 2 of the replay importer (docs/replay.md, "Stages"): the tokenized records of one trace
// put in time order and split by lane, after Perfetto's TraceSorter. Ties are broken by position
// in the file, so two equal timestamps always come out in the order they were written.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "replay/kineto_tokenizer.hpp"

namespace csim::replay {

struct SortedTrace {
  TraceMeta meta;
  std::vector<Record> records;  // sorted by (ts_ns, seq)
  // Indices into records, each in time order:
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::size_t>> host;  // (pid, tid)
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::size_t>>
      gpu;  // (device, stream)
  std::unordered_map<std::int64_t, std::vector<std::size_t>> gpu_by_correlation;
  std::vector<std::size_t> memory;  // [memory] events
  std::vector<std::size_t> sync;    // cuda_sync events
  ImportStats stats;
};

SortedTrace sort_trace(TokenizedTrace t);

}  // namespace csim::replay
