// Inferred edges (docs/replay.md, "Edges"); the rules are in replay_edges.hpp.
#include "replay/replay_edges.hpp"

#include <algorithm>
#include <map>

#include "replay/replay_program.hpp"

namespace csim::replay {

bool is_sync_call(const std::string& name) {
  return name.find("Synchronize") != std::string::npos || name == "cudaMemcpy" ||
         name == "hipMemcpy" || name == "cudaMemcpy2D" || name == "cudaMemset";
}

namespace {

// Indices of `refs` per GPU, sorted by end time (ties: op id).
template <typename Ref>
std::map<int, std::vector<std::size_t>> by_end(const std::vector<Ref>& refs) {
  std::map<int, std::vector<std::size_t>> m;
  for (std::size_t i = 0; i < refs.size(); ++i) m[refs[i].gpu].push_back(i);
  for (auto& [gpu, v] : m)
    std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return refs[a].end_ns != refs[b].end_ns ? refs[a].end_ns < refs[b].end_ns
                                              : refs[a].op < refs[b].op;
    });
  return m;
}

// Walks `sorted` (indices by end) backwards from the last end <= hi, while end > lo, and returns
// the first index `ok` accepts, or -1.
template <typename Ref, typename Ok>
std::ptrdiff_t latest(const std::vector<Ref>& refs, const std::vector<std::size_t>& sorted,
                      TimeNs lo, TimeNs hi, Ok&& ok) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), hi,
                             [&](TimeNs t, std::size_t i) { return t < refs[i].end_ns; });
  while (it != sorted.begin()) {
    --it;
    const Ref& r = refs[*it];
    if (r.end_ns <= lo) break;
    if (ok(r)) return static_cast<std::ptrdiff_t>(*it);
  }
  return -1;
}

void sync_edges(core::Program& p, const EdgeInputs& in,
                const std::map<int, std::vector<std::size_t>>& gpu_by_end, ReplayProgram& out) {
  for (const SyncCall& sc : in.syncs) {
    const GpuOpRef* k = nullptr;
    for (std::size_t i = sc.own_begin; i < sc.own_end; ++i) {
      const GpuOpRef& g = in.gpu_ops[i];
      if (g.end_ns > sc.start_ns && g.end_ns <= sc.end_ns && (k == nullptr || g.end_ns >= k->end_ns))
        k = &g;
    }
    if (k == nullptr && sc.synchronize) {
      auto it = gpu_by_end.find(sc.gpu);
      if (it != gpu_by_end.end()) {
        const std::ptrdiff_t j =
            latest(in.gpu_ops, it->second, sc.start_ns, sc.end_ns + kSyncSlackNs,
                   [&](const GpuOpRef& g) { return g.launch_ns < sc.start_ns; });
        if (j >= 0) k = &in.gpu_ops[static_cast<std::size_t>(j)];
      }
    }
    if (k == nullptr) continue;
    core::Op& op = p.ops[static_cast<std::size_t>(sc.op)];
    op.deps.push_back({k->op, core::DepKind::kHostWaits});
    op.dispatch_ns = std::max<TimeNs>(0, sc.end_ns - k->end_ns);
    out.ranks[static_cast<std::size_t>(sc.gpu)].stats.add(Stat::sync_waits);
  }
}

void stream_edges(core::Program& p, const EdgeInputs& in,
                  const std::map<int, std::vector<std::size_t>>& gpu_by_end, ReplayProgram& out) {
  std::map<int, std::vector<std::size_t>> by_stream;
  for (std::size_t i = 0; i < in.gpu_ops.size(); ++i) by_stream[in.gpu_ops[i].stream].push_back(i);
  for (auto& [stream, v] : by_stream) {
    std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return in.gpu_ops[a].start_ns < in.gpu_ops[b].start_ns;
    });
    TimeNs prev_end = -1;
    for (std::size_t i : v) {
      const GpuOpRef& k = in.gpu_ops[i];
      ImportedRank& rank = out.ranks[static_cast<std::size_t>(k.gpu)];
      const TimeNs ready = std::max(prev_end, k.launch_ns + rank.launch_latency_ns);
      prev_end = std::max(prev_end, k.end_ns);
      if (k.start_ns - ready <= kStreamEdgeSlackNs) continue;
      const std::ptrdiff_t j =
          latest(in.gpu_ops, gpu_by_end.at(k.gpu), ready, k.start_ns + kSyncSlackNs / 2,
                 [&](const GpuOpRef& g) {
                   return g.stream != k.stream && (g.thread != k.thread || g.op < k.op);
                 });
      if (j < 0) continue;
      p.ops[static_cast<std::size_t>(k.op)].deps.push_back(
          {in.gpu_ops[static_cast<std::size_t>(j)].op, core::DepKind::kStreamWaits});
      rank.stats.add(Stat::stream_edges);
    }
  }
}

void thread_edges(core::Program& p, const EdgeInputs& in, ReplayProgram& out) {
  const std::map<int, std::vector<std::size_t>> host_by_end = by_end(in.host_ops);
  for (const HostOpRef& h : in.host_ops) {
    if (!h.gap || h.idle_ns < kThreadEdgeNs) continue;
    const std::ptrdiff_t j = latest(in.host_ops, host_by_end.at(h.gpu), h.start_ns, h.end_ns - 1,
                                    [&](const HostOpRef& y) { return y.thread != h.thread; });
    if (j < 0) continue;
    const HostOpRef& y = in.host_ops[static_cast<std::size_t>(j)];
    core::Op& op = p.ops[static_cast<std::size_t>(h.op)];
    op.deps.push_back({y.op, core::DepKind::kHostWaits});
    // Woken at y's end: what is left of the gap, but never less than its time inside CPU ops.
    const TimeNs covered = (h.end_ns - h.start_ns) - h.idle_ns;
    const TimeNs total = std::max(h.end_ns - y.end_ns, covered);
    op.dispatch_ns = std::min(op.dispatch_ns, total);
    op.python_ns = total - op.dispatch_ns;
    out.ranks[static_cast<std::size_t>(h.gpu)].stats.add(Stat::thread_edges);
  }
}

}  // namespace

void infer_edges(core::Program& p, const EdgeInputs& in, ReplayProgram& out) {
  const std::map<int, std::vector<std::size_t>> gpu_by_end = by_end(in.gpu_ops);
  sync_edges(p, in, gpu_by_end, out);
  stream_edges(p, in, gpu_by_end, out);
  thread_edges(p, in, out);
}

}  // namespace csim::replay
