// Collectives re-costed by the cost model's ratio (docs/replay.md, "Collectives on another
// cluster"; the rule in collective_recost.hpp).
#include "replay/collective_recost.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/hardware/topology.hpp"
#include "core/scenario/cluster_document.hpp"
#include "core/scenario/scenario_parser.hpp"

namespace csim::replay {

std::string cluster_file_of(const std::vector<std::string>& overrides) {
  std::string file;
  for (const std::string& s : overrides)
    if (s.rfind("cluster=", 0) == 0) file = s.substr(8);
  return file;
}

JobClusters job_clusters(const ReplayProgram& rp, const std::string& source_gpu,
                         int source_gpus_per_node, int dp_scale,
                         const std::vector<std::string>& overrides) {
  JobClusters j;
  j.ranks = static_cast<int>(rp.ranks.size());
  for (const ImportedRank& r : rp.ranks) j.ranks = std::max(j.ranks, r.meta.world_size);
  for (const GpuOpInfo& k : rp.gpu_ops) {
    j.ranks = std::max(j.ranks, k.group_size);
    for (int r : k.group_ranks) j.ranks = std::max(j.ranks, r + 1);
  }
  if (static_cast<long long>(j.ranks) * dp_scale > (1 << 20))
    throw InputError("(command line)", "--set replay.dp_scale",
                     std::to_string(j.ranks) + " ranks x " + std::to_string(dp_scale) +
                         " is more than 1,048,576 GPUs",
                     "a smaller factor");
  j.ranks_to = j.ranks * dp_scale;
  auto nodes_for = [](int ranks, int per_node) { return (ranks + per_node - 1) / per_node; };
  // As traced: the source GPU's catalog node (its links and NICs), gpus_per_node of them a node.
  const int g = source_gpus_per_node;
  nlohmann::json job = {
      {"nodes", nodes_for(j.ranks, g)}, {"gpus_per_node", g}, {"gpu", source_gpu}};
  j.from = core::parse_cluster_document(job, "(command line)");
  // As asked: the same, or the cluster file of cluster=FILE, with the cluster.* keys.
  std::vector<std::string> sets;
  std::string nodes_set, file = cluster_file_of(overrides);
  for (const std::string& s : overrides) {
    if (s.rfind("cluster.nodes=", 0) == 0)
      nodes_set = s;
    else if (s.rfind("cluster.", 0) == 0)
      sets.push_back(s);
  }
  job["nodes"] = 1;
  auto parse = [&](const std::vector<std::string>& with) {
    return file.empty() ? core::parse_cluster_document(job, "(command line)", with)
                        : core::parse_cluster_file(file, with);
  };
  const int per_node = parse(sets).gpus_per_node;
  sets.push_back(nodes_set.empty()
                     ? "cluster.nodes=" + std::to_string(nodes_for(j.ranks_to, per_node))
                     : nodes_set);
  j.to = parse(sets);
  if (j.to.world_gpus() < j.ranks_to)
    throw InputError("(command line)", "--set cluster.nodes",
                     std::to_string(j.to.nodes) + " nodes of " +
                         std::to_string(j.to.gpus_per_node) + " GPUs hold fewer than the job's " +
                         std::to_string(j.ranks_to) + " ranks",
                     "leave cluster.nodes out: the ranks fill ceil(ranks / gpus_per_node) nodes");
  return j;
}

bool is_data_parallel(core::CollectiveKind kind, int group_size, int world) {
  const bool dp_kind = kind == core::CollectiveKind::kAllReduce ||
                       kind == core::CollectiveKind::kReduceScatter ||
                       kind == core::CollectiveKind::kAllGather;
  return dp_kind && group_size > 1 && group_size == world;
}

TimeNs modelled_collective_ns(const core::Topology& topo, const core::CommParams& params,
                              core::CollectiveKind kind, int p, double bytes) {
  std::vector<int> gpus(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) gpus[static_cast<std::size_t>(i)] = i;
  return modelled_collective_ns(topo, params, kind, gpus, bytes);
}

TimeNs modelled_collective_ns(const core::Topology& topo, const core::CommParams& params,
                              core::CollectiveKind kind, const std::vector<int>& gpus,
                              double bytes) {
  const bool rooted =
      kind == core::CollectiveKind::kBroadcast || kind == core::CollectiveKind::kReduce;
  return core::plan_collective(topo, params, kind, params.algo, gpus, rooted ? gpus.front() : -1,
                               bytes)
      .predicted_ns;
}

std::vector<int> group_gpus(const std::vector<int>& ranks, int p, int world_gpus) {
  std::vector<int> gpus;
  if (ranks.size() >= 2) {
    // The group's own ranks, continued at their stride when it grows (docs/replay.md,
    // "Data-parallel scale-out"): [0, 8] x 2 -> [0, 8, 16, 24].
    const int stride = ranks[1] - ranks[0];
    bool regular = stride >= 1;
    for (std::size_t i = 1; i < ranks.size(); ++i) regular &= ranks[i] - ranks[i - 1] == stride;
    for (int i = 0; i < p; ++i) {
      const int g = i < static_cast<int>(ranks.size()) ? ranks[static_cast<std::size_t>(i)]
                                                       : (regular ? ranks[0] + i * stride : -1);
      if (g < 0 || g >= world_gpus) {
        gpus.clear();
        break;
      }
      gpus.push_back(g);
    }
    if (!gpus.empty()) return gpus;
  }
  for (int i = 0; i < p; ++i) gpus.push_back(i);
  return gpus;
}

std::set<std::string> data_parallel_groups(const ReplayProgram& rp) {
  std::set<std::string> keys;
  for (const GpuOpInfo& k : rp.gpu_ops) {
    if (k.cls != KernelClass::kCollective || !k.grad_hook || k.group_key.empty()) continue;
    const core::CollectiveKind kind = rp.program.ops[static_cast<std::size_t>(k.op)].collective;
    if (kind == core::CollectiveKind::kAllReduce || kind == core::CollectiveKind::kReduceScatter)
      keys.insert(k.group_key);
  }
  return keys;
}

namespace {

std::string mib(double bytes) {
  std::ostringstream os;
  os << std::setprecision(4) << bytes / (1024.0 * 1024.0) << " MiB";
  return os.str();
}

}  // namespace

std::vector<ExplainRow> recost_collectives(ReplayProgram& rp, const RecostRequest& rq) {
  // The topologies are built only when some collective can be re-costed (a 128-rank job's
  // topology is not free), and each (kind, p, p', bytes) is planned once.
  std::unique_ptr<core::Topology> from, to;
  std::map<std::tuple<int, int, int, Bytes, std::vector<int>>, std::pair<TimeNs, TimeNs>> planned;
  const std::set<std::string> dp_groups = data_parallel_groups(rp);
  std::vector<ExplainRow> rows;
  std::map<std::pair<std::string, std::string>, std::size_t> row_of;
  for (const GpuOpInfo& k : rp.gpu_ops) {
    if (k.cls != KernelClass::kCollective) continue;
    core::Op& op = rp.program.ops[static_cast<std::size_t>(k.op)];
    const int p = k.group_size;
    std::string rule;
    TimeNs d = k.measured_ns;
    if (op.bytes <= 0) {
      rule = "not re-costable (no size in the trace): measured";
    } else if (p < 1) {
      rule = "not re-costable (no Group size in the trace): measured";
    } else {
      // The data-parallel group: the one the gradient hooks reduce over, else a job-wide one.
      const bool dp = dp_groups.empty()
                          ? is_data_parallel(op.collective, p, rq.world)
                          : is_data_parallel(op.collective, 2, 2) && dp_groups.count(k.group_key);
      const int p2 = dp ? p * rq.dp_scale : p;
      if (!from) {
        from = std::make_unique<core::Topology>(rq.from);
        to = std::make_unique<core::Topology>(rq.to);
      }
      const auto key =
          std::make_tuple(static_cast<int>(op.collective), p, p2, op.bytes, k.group_ranks);
      auto it = planned.find(key);
      if (it == planned.end()) {
        const double s = static_cast<double>(op.bytes);
        it = planned
                 .emplace(key,
                          std::make_pair(modelled_collective_ns(
                                             *from, rq.params, op.collective,
                                             group_gpus(k.group_ranks, p, rq.from.world_gpus()), s),
                                         modelled_collective_ns(
                                             *to, rq.params, op.collective,
                                             group_gpus(k.group_ranks, p2, rq.to.world_gpus()), s)))
                 .first;
      }
      const auto [ta, tb] = it->second;
      std::ostringstream os;
      os << std::setprecision(4);
      if (ta <= 0 || tb <= 0) {
        os << "not re-costable (the model gives no time): measured";
      } else {
        // d' = d * t(to, p') / t(from, p) (docs/replay.md, "Collectives on another cluster");
        // equal model times keep d exactly (the job's own cluster).
        const double r = static_cast<double>(tb) / static_cast<double>(ta);
        if (tb != ta) d = static_cast<TimeNs>(std::llround(static_cast<double>(d) * r));
        os << "x" << r << " (" << core::to_string(op.collective) << " "
           << mib(static_cast<double>(op.bytes)) << " over " << p
           << (p2 != p ? " -> " + std::to_string(p2) : std::string()) << " GPUs: model "
           << static_cast<double>(ta) / 1000.0 << " -> " << static_cast<double>(tb) / 1000.0
           << " us)";
      }
      rule = os.str();
    }
    op.fixed_ns = d;
    std::string name = rp.program.name_of(op);
    auto [it, fresh] = row_of.emplace(std::make_pair(name, rule), rows.size());
    if (fresh) rows.push_back({std::move(name), KernelClass::kCollective, rule, 0, 0, 0});
    ExplainRow& row = rows[it->second];
    ++row.count;
    row.measured_ns += k.measured_ns;
    row.replayed_ns += d;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ExplainRow& a, const ExplainRow& b) {
    return a.measured_ns > b.measured_ns;
  });
  return rows;
}

}  // namespace csim::replay
