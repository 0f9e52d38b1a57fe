#include "profiler/rank_symmetry.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace csim::prof {

std::vector<MirroredGpu> read_mirrored_gpus(const nlohmann::json& md) {
  std::vector<MirroredGpu> out;
  if (!md.is_object() || !md.contains("rank_symmetry") || !md["rank_symmetry"].is_object())
    return out;
  const nlohmann::json& rs = md["rank_symmetry"];
  if (!rs.contains("mirrors") || !rs["mirrors"].is_array()) return out;
  for (const nlohmann::json& e : rs["mirrors"]) {
    if (e.is_array() && e.size() == 3 && e[0].is_number_integer() && e[1].is_number_integer() &&
        e[2].is_number_integer())
      out.push_back({e[0].get<int>(), e[1].get<int>(), e[2].get<int>()});
  }
  return out;
}

int expand_mirrored_gpus(Trace& tr) {
  const std::vector<MirroredGpu> mirrors = read_mirrored_gpus(tr.metadata);
  if (mirrors.empty()) return 0;
  int per_node = 0;
  if (tr.metadata.contains("cluster") && tr.metadata["cluster"].is_object())
    per_node = tr.metadata["cluster"].value("gpus_per_node", 0);
  // Ids in copies start above every id in the trace, one block per mirror.
  std::int64_t max_corr = 0, max_flow = 0;
  for (const TraceEvent& e : tr.events) max_corr = std::max(max_corr, e.correlation);
  for (const FlowEvent& f : tr.flows) max_flow = std::max(max_flow, f.id);
  const std::size_t n_events = tr.events.size(), n_counters = tr.counters.size();
  const std::size_t n_flows = tr.flows.size(), n_threads = tr.threads.size();
  const std::vector<ProcessInfo> processes = tr.processes;
  int added = 0;
  for (const MirroredGpu& m : mirrors) {
    const auto rep = std::find_if(processes.begin(), processes.end(),
                                  [&](const ProcessInfo& p) { return p.pid == m.rep; });
    if (rep == processes.end()) continue;
    ++added;
    const std::int64_t corr_off = (max_corr + 1) * added, flow_off = (max_flow + 1) * added;
    ProcessInfo pi = *rep;
    pi.pid = m.gpu;
    pi.gpu = m.gpu;
    pi.rank = m.rank;
    pi.sort_index = m.gpu;
    if (per_node > 0) {
      pi.node = m.gpu / per_node;
      pi.name = "node " + std::to_string(pi.node) + " / GPU " + std::to_string(m.gpu % per_node);
    }
    tr.processes.push_back(pi);
    for (std::size_t i = 0; i < n_threads; ++i) {
      if (tr.threads[i].pid != m.rep) continue;
      ThreadInfo t = tr.threads[i];
      t.pid = m.gpu;
      tr.threads.push_back(t);
    }
    for (std::size_t i = 0; i < n_events; ++i) {
      if (tr.events[i].pid != m.rep) continue;
      TraceEvent e = tr.events[i];
      e.pid = m.gpu;
      if (e.correlation >= 0) e.correlation += corr_off;
      tr.events.push_back(std::move(e));
    }
    for (std::size_t i = 0; i < n_counters; ++i) {
      if (tr.counters[i].pid != m.rep) continue;
      CounterSample c = tr.counters[i];
      c.pid = m.gpu;
      tr.counters.push_back(std::move(c));
    }
    // Flows within the representative's process (launch -> kernel, dependencies) are copied;
    // flows to other GPUs would need the mirror's map of peers, which the trace does not hold.
    for (std::size_t i = 0; i < n_flows; ++i) {
      const FlowEvent& f = tr.flows[i];
      if (f.from_pid != m.rep || f.to_pid != m.rep) continue;
      FlowEvent c = f;
      c.id += flow_off;
      c.from_pid = c.to_pid = m.gpu;
      tr.flows.push_back(c);
    }
  }
  std::stable_sort(tr.processes.begin(), tr.processes.end(),
                   [](const ProcessInfo& a, const ProcessInfo& b) { return a.pid < b.pid; });
  nlohmann::json& rs = tr.metadata["rank_symmetry"];
  rs.erase("mirrors");
  rs["expanded"] = true;
  return added;
}

}  // namespace csim::prof
