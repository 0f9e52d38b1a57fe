// Collectives of a replayed run re-costed on another interconnect, node count or data-parallel
// size (docs/replay.md, "Collectives on another cluster"). The measured duration is the reference
// at the job's own cluster; the cost model (core::plan_collective, docs/cost-model.md,
// "Communication") gives the ratio:
//   d' = d * t(to, kind, p', S) / t(from, kind, p, S)
// with S the collective's bytes (record_param_comms' In/Out msg nelems x dtype), p its Group size,
// p' = p * dp_scale for a data-parallel collective (all-reduce, reduce-scatter or all-gather over
// the data-parallel group: the group its gradient hooks reduce over, else one as large as the
// job), else p; over the group's own ranks where the trace names them. On the job's own cluster
// from == to and d' = d exactly. Collectives without a size or a group size are not re-costable: d'
// = d.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/cost/collective_cost.hpp"
#include "core/scenario/scenario.hpp"
#include "replay/gpu_whatif.hpp"
#include "replay/replay_program.hpp"

namespace csim::replay {

struct RecostRequest {
  core::ClusterSpec from, to;  // the job's cluster as traced, and as asked (--set)
  core::CommParams params;     // the cost model's constants (the scenario's nccl forcing)
  int world = 1;               // the job's ranks (distributedInfo.world_size, at least the traces)
  int dp_scale = 1;            // data-parallel ranks x this (replay.dp_scale)
};

// The job the traces come from, on its cluster as traced and as the cluster.* keys of --set ask
// (docs/replay.md, "Collectives on another cluster"; --set cluster=FILE names a cluster file for
// the latter): `ranks` = distributedInfo.world_size, at
// least the traces and every Group size, `source_gpus_per_node` a node on the source GPU's catalog
// node; `ranks_to` = ranks x dp_scale filling ceil(ranks_to / gpus_per_node) nodes unless
// cluster.nodes names them. Throws InputError (--set cluster.nodes) when those cannot hold them.
struct JobClusters {
  core::ClusterSpec from, to;
  int ranks = 1, ranks_to = 1;
};
// The FILE of the last --set cluster=FILE ("" when none): the job's cluster as asked.
std::string cluster_file_of(const std::vector<std::string>& overrides);

JobClusters job_clusters(const ReplayProgram& rp, const std::string& source_gpu,
                         int source_gpus_per_node, int dp_scale,
                         const std::vector<std::string>& overrides);

// True for a collective the data-parallel group runs: all-reduce, reduce-scatter or all-gather
// over a group of the whole job (docs/replay.md, "Data-parallel scale-out").
bool is_data_parallel(core::CollectiveKind kind, int group_size, int world);

// The cost model's time of one collective of `bytes` per GPU over the first `p` GPUs of `topo`
// (rank order = GPU order: the group fills nodes in turn).
TimeNs modelled_collective_ns(const core::Topology& topo, const core::CommParams& params,
                              core::CollectiveKind kind, int p, double bytes);

// The same over the given GPUs of `topo` (a group's own ranks).
TimeNs modelled_collective_ns(const core::Topology& topo, const core::CommParams& params,
                              core::CollectiveKind kind, const std::vector<int>& gpus,
                              double bytes);
// The GPUs a group of p ranks runs on: its recorded ranks (continued at their stride when p is
// larger), else 0 ... p-1; ranks past world_gpus fall back to 0 ... p-1.
std::vector<int> group_gpus(const std::vector<int>& ranks, int p, int world_gpus);
// The data-parallel groups: the groups of the all-reduces and reduce-scatters a gradient hook
// launched (GpuOpInfo::grad_hook); empty when none did (then a job-wide group is one).
std::set<std::string> data_parallel_groups(const ReplayProgram& rp);

// Rescales every collective of `rp` by the rule above (Op::fixed_ns); returns one row per kernel
// name and rule, largest measured total first, for --explain.
std::vector<ExplainRow> recost_collectives(ReplayProgram& rp, const RecostRequest& rq);

}  // namespace csim::replay
