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

int gpus_per_node_of(const nlohmann::json& md) {
  if (!md.is_object() || !md.contains("cluster") || !md["cluster"].is_object()) return 0;
  return md["cluster"].value("gpus_per_node", 0);
}

ProcessInfo mirror_process(const ProcessInfo& rep, const MirroredGpu& m, int gpus_per_node) {
  ProcessInfo pi = rep;
  pi.pid = m.gpu;
  pi.gpu = m.gpu;
  pi.rank = m.rank;
  pi.sort_index = m.gpu;
  pi.node = gpus_per_node > 0 ? m.gpu / gpus_per_node : -1;
  pi.name = gpu_process_name(m.gpu, gpus_per_node);
  return pi;
}

int expand_mirrored_gpus(Trace& tr) {
  const std::vector<MirroredGpu> mirrors = read_mirrored_gpus(tr.metadata);
  if (mirrors.empty()) return 0;
  const int per_node = gpus_per_node_of(tr.metadata);
  // What each representative owns, indexed once (copies are appended while iterating).
  struct Owned {
    const ProcessInfo* process = nullptr;
    std::vector<std::size_t> threads, events, counters, flows;
  };
  const std::vector<ProcessInfo> processes = tr.processes;
  std::map<std::int32_t, Owned> owned;
  for (const ProcessInfo& p : processes) owned[p.pid].process = &p;
  auto own = [&](std::int32_t pid) -> Owned* {
    const auto it = owned.find(pid);
    return it == owned.end() ? nullptr : &it->second;
  };
  for (std::size_t i = 0; i < tr.threads.size(); ++i)
    if (Owned* o = own(tr.threads[i].pid)) o->threads.push_back(i);
  for (std::size_t i = 0; i < tr.events.size(); ++i)
    if (Owned* o = own(tr.events[i].pid)) o->events.push_back(i);
  for (std::size_t i = 0; i < tr.counters.size(); ++i)
    if (Owned* o = own(tr.counters[i].pid)) o->counters.push_back(i);
  // Flows within the representative's process (launch -> kernel, dependencies) are copied;
  // flows to other GPUs would need the mirror's map of peers, which the trace does not hold.
  for (std::size_t i = 0; i < tr.flows.size(); ++i) {
    if (tr.flows[i].from_pid != tr.flows[i].to_pid) continue;
    if (Owned* o = own(tr.flows[i].from_pid)) o->flows.push_back(i);
  }
  // Ids in copies start above every id in the trace, one block per mirror.
  std::int64_t max_corr = 0, max_flow = 0;
  for (const TraceEvent& e : tr.events) max_corr = std::max(max_corr, e.correlation);
  for (const FlowEvent& f : tr.flows) max_flow = std::max(max_flow, f.id);
  int added = 0;
  for (const MirroredGpu& m : mirrors) {
    const Owned* o = own(m.rep);
    if (o == nullptr || o->process == nullptr) continue;
    ++added;
    const std::int64_t corr_off = (max_corr + 1) * added, flow_off = (max_flow + 1) * added;
    tr.processes.push_back(mirror_process(*o->process, m, per_node));
    for (std::size_t i : o->threads) {
      ThreadInfo t = tr.threads[i];
      t.pid = m.gpu;
      tr.threads.push_back(std::move(t));
    }
    for (std::size_t i : o->events) {
      TraceEvent e = tr.events[i];
      e.pid = m.gpu;
      if (e.correlation >= 0) e.correlation += corr_off;
      tr.events.push_back(std::move(e));
    }
    for (std::size_t i : o->counters) {
      CounterSample c = tr.counters[i];
      c.pid = m.gpu;
      tr.counters.push_back(std::move(c));
    }
    for (std::size_t i : o->flows) {
      FlowEvent c = tr.flows[i];
      c.id += flow_off;
      c.from_pid = c.to_pid = m.gpu;
      tr.flows.push_back(std::move(c));
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
