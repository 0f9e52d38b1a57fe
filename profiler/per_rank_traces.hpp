// Per-rank files (docs/trace-format.md, "Per-rank files"): one Kineto-style trace per rank, as
// multi-rank analysers such as Holistic Trace Analysis read them, each file self-contained.
#pragma once

#include <string>
#include <vector>

#include "core/progress.hpp"
#include "profiler/trace.hpp"

namespace csim::prof {

// A run simulated with rank symmetry (docs/cost-model.md, "Rank symmetry") has the events of its
// representative GPUs only; these say which files the mirrored GPUs get.
enum class PerRankMirrors {
  // A file per GPU of the run (the default): a mirrored GPU's file is its representative's with
  // the GPU's own process, rank and ids, written from the representative's file one at a time
  // (never the whole expanded trace in memory); the same bytes as expand_mirrored_gpus then one
  // file per process.
  kEveryRank,
  // A file per simulated GPU only; each names the ranks it stands for in
  // clustersim.rank_symmetry.stands_for (`simrun --per-rank-representatives`).
  kRepresentatives,
};

struct PerRankFile {
  int rank = 0;
  std::vector<int> stands_for;  // the ranks whose events this file's are, itself first
  bool mirrored = false;        // written as a copy of its representative's file
};

struct PerRankResult {
  std::vector<PerRankFile> files;  // in the order written (by pid, each mirror after its rep)
  int world_size = 0;              // distributedInfo.world_size of every file
};

// Creates DIR and writes DIR/rank-<r>.json per GPU process (and, with kEveryRank, per mirrored
// GPU), each with the whole metadata and distributedInfo {rank, world_size}. Throws
// std::runtime_error when DIR cannot be created or a file cannot be written. With `progress`, the
// phase "writing per-rank traces", counting files (docs/limits.md, "Progress").
PerRankResult write_per_rank_traces(const Trace& trace, const std::string& dir,
                                    PerRankMirrors mirrors = PerRankMirrors::kEveryRank,
                                    core::Progress* progress = nullptr);

// "0-3, 8, 10-11": sorted ranks as ranges.
std::string rank_ranges(std::vector<int> ranks);

}  // namespace csim::prof
