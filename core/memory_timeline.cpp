#include "core/memory_timeline.hpp"

#include <algorithm>
#include <map>

namespace csim::core {

MemoryReport memory_timeline(const Program& program, const std::vector<OpTiming>& timings,
                             const ClusterSpec& cluster) {
  MemoryReport rep;
  std::map<int, std::size_t> index;  // gpu -> position in rep.gpus
  std::vector<char> communicates(static_cast<std::size_t>(program.world_gpus), 0);
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::kCollective && op.gpu < program.world_gpus) communicates[op.gpu] = 1;
  }
  for (int g : program.active_gpus) {
    if (program.symmetry.enabled() && program.symmetry.weight_of_gpu[g] == 0) continue;  // mirrored
    index[g] = rep.gpus.size();
    GpuMemory m;
    m.gpu = g;
    m.capacity_bytes = usable_memory_bytes(cluster, communicates[g] != 0);
    rep.gpus.push_back(m);
  }
  // Memory ops in execution order: by time, then by op id (issue order) for equal times.
  std::vector<OpId> mem_ops;
  for (const Op& op : program.ops) {
    if ((op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) && timings[op.id].start_ns >= 0) mem_ops.push_back(op.id);
  }
  std::stable_sort(mem_ops.begin(), mem_ops.end(), [&](OpId a, OpId b) { return timings[a].start_ns < timings[b].start_ns; });
  std::vector<std::array<Bytes, kNumMemCategories>> current(rep.gpus.size());
  std::vector<Bytes> total(rep.gpus.size(), 0);
  for (OpId id : mem_ops) {
    const Op& op = program.ops[id];
    auto it = index.find(op.gpu);
    if (it == index.end()) continue;
    const std::size_t k = it->second;
    const Bytes delta = op.kind == OpKind::kAlloc ? op.bytes : -op.bytes;
    current[k][static_cast<int>(op.mem_category)] += delta;
    total[k] += delta;
    GpuMemory& m = rep.gpus[k];
    const TimeNs t = timings[id].start_ns;
    if (!m.samples.empty() && m.samples.back().t_ns == t) {
      m.samples.back().total = total[k];  // several changes at one instant: keep the last state
      m.samples.back().by_category = current[k];
    } else {
      m.samples.push_back(MemorySample{t, total[k], current[k]});
    }
    if (total[k] > m.peak_bytes) {
      m.peak_bytes = total[k];
      m.peak_at_ns = t;
      m.at_peak = current[k];
    }
    if (op.kind == OpKind::kAlloc && total[k] > m.capacity_bytes && m.capacity_bytes > 0) {
      if (!rep.oom || t < rep.oom->at_ns) {
        rep.oom = OomVerdict{op.gpu, id, op.name, op.bytes, total[k] - m.capacity_bytes, m.capacity_bytes, t};
      }
    }
  }
  std::vector<int> gpus;
  std::vector<Bytes> capacity;
  for (const GpuMemory& m : rep.gpus) {
    gpus.push_back(m.gpu);
    capacity.push_back(m.capacity_bytes);
  }
  rep.allocator = simulate_caching_allocator(program, timings, gpus, capacity);
  return rep;
}

}  // namespace csim::core
