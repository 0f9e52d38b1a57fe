// Traces of a run simulated with rank symmetry (docs/cost-model.md, "Rank symmetry"): which GPUs
// are mirror images of a simulated one, and expanding the trace so every GPU has its events.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/trace.hpp"

namespace csim::prof {

struct MirroredGpu {
  int gpu = 0;   // the mirrored GPU
  int rank = 0;  // its rank
  int rep = 0;   // the simulated GPU whose events stand for its own
};

// metadata["rank_symmetry"]["mirrors"] ([gpu, rank, representative] each); empty when absent.
std::vector<MirroredGpu> read_mirrored_gpus(const nlohmann::json& metadata);

// The process of mirrored GPU `m`: its representative's, renamed and renumbered.
// gpus_per_node from metadata["cluster"] (0 when absent).
ProcessInfo mirror_process(const ProcessInfo& rep, const MirroredGpu& m, int gpus_per_node);
int gpus_per_node_of(const nlohmann::json& metadata);

// Gives every mirrored GPU a copy of its representative's process, threads, events, memory
// counters and flows (correlation and flow ids renumbered), and drops the mirrors list from the
// metadata, leaving a trace as a full-fidelity run would have written (docs/trace-format.md,
// "Rank symmetry"). Returns the number of GPUs added. `simrun --expand-mirrors`.
int expand_mirrored_gpus(Trace& trace);

}  // namespace csim::prof
