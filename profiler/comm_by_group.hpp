// Communication per process group (docs/summary.md, "Communication by group"): how long each
// group's collectives and transfers run per step on one GPU, and how much of that no compute
// overlaps. A group is named by its label, the first word of the event's "Process Group
// Description" (PyTorch's record_param_comms arg; ClusterSim writes its groups' names there:
// "cp (tp 0, dp 0, pp 0)" -> "cp"), else of its "Process Group Name", else "unnamed".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/units.hpp"
#include "profiler/trace.hpp"

namespace csim::prof {

struct GroupComm {
  std::string group;     // the label ("tp", "cp", "dp", "pp", "default_pg", ...)
  double comm_s = 0;     // its events' union per step
  double exposed_s = 0;  // of that, the time no compute runs on the GPU
};

// The label of a communication event (see above).
std::string group_label(const TraceEvent& e);

// One GPU's communication by group over `window` (a union of [start, end) intervals given as
// pairs), per step (times `per_step`); groups in first-seen order. Two groups' events that run at
// the same time count for each, so the groups' figures may sum to more than the GPU's
// communication time.
std::vector<GroupComm> comm_by_group(const std::vector<const TraceEvent*>& events,
                                     const std::vector<std::pair<TimeNs, TimeNs>>& window,
                                     double per_step);

// Adds `gpu`'s groups, each figure times `weight` (rank symmetry: the GPUs it stands for), into
// `total` (groups in first-seen order).
void add_comm_by_group(std::vector<GroupComm>& total, const std::vector<GroupComm>& gpu,
                       int weight);

}  // namespace csim::prof
