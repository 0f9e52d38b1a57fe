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

StreamIndex::StreamIndex(const std::vector<GpuOpRef>& ops) : ops_(ops) {
  for (std::size_t i = 0; i < ops.size(); ++i) by_stream_[ops[i].stream].push_back(i);
  for (auto& [stream, v] : by_stream_)
    std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return ops[a].launch_ns != ops[b].launch_ns ? ops[a].launch_ns < ops[b].launch_ns
                                                  : ops[a].op < ops[b].op;
    });
}

std::ptrdiff_t StreamIndex::last_before(int stream, TimeNs t) const {
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return -1;
  const std::vector<std::size_t>& v = it->second;
  auto pos = std::lower_bound(v.begin(), v.end(), t,
                              [&](std::size_t i, TimeNs x) { return ops_[i].launch_ns < x; });
  return pos == v.begin() ? -1 : static_cast<std::ptrdiff_t>(*(pos - 1));
}

std::ptrdiff_t StreamIndex::first_from(int stream, TimeNs t) const {
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return -1;
  const std::vector<std::size_t>& v = it->second;
  auto pos = std::lower_bound(v.begin(), v.end(), t,
                              [&](std::size_t i, TimeNs x) { return ops_[i].launch_ns < x; });
  return pos == v.end() ? -1 : static_cast<std::ptrdiff_t>(*pos);
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

// The last GPU op the call's thread launched before it (-1: none).
std::ptrdiff_t last_launch_of(const EdgeInputs& in, const SyncCall& sc) {
  for (std::size_t i = sc.own_begin; i-- > 0;) {
    const GpuOpRef& g = in.gpu_ops[i];
    if (g.gpu != sc.gpu || g.thread != sc.thread) return -1;
    if (g.launch_op != core::kNoOp && g.launch_ns < sc.start_ns)
      return static_cast<std::ptrdiff_t>(i);
  }
  return -1;
}

void sync_edges(core::Program& p, const EdgeInputs& in,
                const std::map<int, std::vector<std::size_t>>& gpu_by_end, const StreamIndex& idx,
                ReplayProgram& out) {
  // The cudaEventRecord calls of each GPU by start.
  std::map<int, std::vector<std::size_t>> records;
  for (std::size_t i = 0; i < in.syncs.size(); ++i)
    if (in.syncs[i].kind == SyncKind::kEventRecord) records[in.syncs[i].gpu].push_back(i);
  for (auto& [gpu, v] : records)
    std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return in.syncs[a].start_ns < in.syncs[b].start_ns;
    });
  for (const SyncCall& sc : in.syncs) {
    core::Op& op = p.ops[static_cast<std::size_t>(sc.op)];
    ImportStats& stats = out.ranks[static_cast<std::size_t>(sc.gpu)].stats;
    // Read: what the call waits for is named (cudaDeviceSynchronize: every stream; a cuda_sync
    // record: the stream, or the stream and time of the cudaEventRecord).
    std::vector<std::ptrdiff_t> named;
    if (sc.kind == SyncKind::kDeviceSync) {
      for (const auto& [stream, v] : idx.streams())
        if (in.gpu_ops[v.front()].gpu == sc.gpu)
          named.push_back(idx.last_before(stream, sc.start_ns));
    } else if (sc.read && sc.kind == SyncKind::kStreamSync && sc.sync_stream >= 0) {
      named.push_back(idx.last_before(sc.sync_stream, sc.start_ns));
    } else if (sc.read && sc.kind == SyncKind::kEventSync && sc.record_stream >= 0) {
      named.push_back(idx.last_before(sc.record_stream, sc.record_ns));
    }
    if (sc.kind == SyncKind::kDeviceSync || (sc.read && sc.kind != SyncKind::kStreamWait)) {
      TimeNs latest = -1;
      for (std::ptrdiff_t j : named) {
        if (j < 0) continue;
        const GpuOpRef& g = in.gpu_ops[static_cast<std::size_t>(j)];
        if (g.end_ns > sc.end_ns + kSyncSlackNs) continue;  // not what the call waited for
        op.deps.push_back({g.op, core::DepKind::kHostWaits});
        latest = std::max(latest, g.end_ns);
      }
      if (latest < 0) continue;
      if (latest > sc.start_ns) op.dispatch_ns = std::max<TimeNs>(0, sc.end_ns - latest);
      stats.add(Stat::sync_reads);
      continue;
    }
    const GpuOpRef* k = nullptr;
    for (std::size_t i = sc.own_begin; i < sc.own_end; ++i) {
      const GpuOpRef& g = in.gpu_ops[i];
      if (g.end_ns > sc.start_ns && g.end_ns <= sc.end_ns &&
          (k == nullptr || g.end_ns >= k->end_ns))
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
    if (k != nullptr) {
      op.deps.push_back({k->op, core::DepKind::kHostWaits});
      op.dispatch_ns = std::max<TimeNs>(0, sc.end_ns - k->end_ns);
      stats.add(Stat::sync_waits);
      continue;
    }
    // A cudaStreamSynchronize that did not block synchronised the thread's current stream, the
    // one its last launch went to, which had finished; a cudaEventSynchronize that did not block,
    // the latest event recorded before it: the last op its recording thread had launched
    // (docs/replay.md, "Edges").
    std::ptrdiff_t j = -1;
    Stat stat = Stat::sync_last_launch;
    if (sc.kind == SyncKind::kStreamSync) {
      j = last_launch_of(in, sc);
    } else if (sc.kind == SyncKind::kEventSync) {
      stat = Stat::sync_last_record;
      auto rv = records.find(sc.gpu);
      if (rv != records.end()) {
        auto pos =
            std::lower_bound(rv->second.begin(), rv->second.end(), sc.start_ns,
                             [&](std::size_t a, TimeNs t) { return in.syncs[a].start_ns < t; });
        if (pos != rv->second.begin()) j = last_launch_of(in, in.syncs[*(pos - 1)]);
      }
    }
    if (j < 0) continue;
    const GpuOpRef& g = in.gpu_ops[static_cast<std::size_t>(j)];
    if (g.end_ns > sc.end_ns + kSyncSlackNs) continue;
    op.deps.push_back({g.op, core::DepKind::kHostWaits});
    stats.add(stat);
  }
}

void stream_edges(core::Program& p, EdgeInputs& in,
                  const std::map<int, std::vector<std::size_t>>& gpu_by_end, ReplayProgram& out,
                  bool hold_unexplained) {
  std::map<int, std::vector<std::size_t>> by_stream;
  for (std::size_t i = 0; i < in.gpu_ops.size(); ++i) by_stream[in.gpu_ops[i].stream].push_back(i);
  for (auto& [stream, v] : by_stream)
    std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return in.gpu_ops[a].start_ns < in.gpu_ops[b].start_ns;
    });
  for (const auto& [stream, v] : by_stream) {
    TimeNs prev_end = -1;
    for (std::size_t i : v) {
      const GpuOpRef& k = in.gpu_ops[i];
      ImportedRank& rank = out.ranks[static_cast<std::size_t>(k.gpu)];
      const TimeNs ready = std::max(prev_end, k.launch_ns + rank.launch_latency_ns);
      prev_end = std::max(prev_end, k.end_ns);
      if (k.start_ns - ready <= kStreamEdgeSlackNs) continue;
      const std::ptrdiff_t j =
          latest(in.gpu_ops, gpu_by_end.at(k.gpu), ready, k.start_ns + kStreamEdgeAfterNs,
                 [&](const GpuOpRef& g) {
                   return g.stream != k.stream && (g.thread != k.thread || g.op < k.op);
                 });
      if (j >= 0) {
        // The latest, and with it the latest op of every other stream that ended within
        // kStreamEdgeNearNs of it: which of them the event stood for the trace does not say.
        const TimeNs latest_end = in.gpu_ops[static_cast<std::size_t>(j)].end_ns;
        std::map<int, std::ptrdiff_t> per_stream;
        latest(in.gpu_ops, gpu_by_end.at(k.gpu), std::max(ready, latest_end - kStreamEdgeNearNs),
               k.start_ns + kStreamEdgeAfterNs, [&](const GpuOpRef& g) {
                 if (g.stream != k.stream && (g.thread != k.thread || g.op < k.op))
                   per_stream.emplace(g.stream,
                                      static_cast<std::ptrdiff_t>(&g - in.gpu_ops.data()));
                 return false;
               });
        for (const auto& [st, x] : per_stream)
          p.ops[static_cast<std::size_t>(k.op)].deps.push_back(
              {in.gpu_ops[static_cast<std::size_t>(x)].op, core::DepKind::kStreamWaits});
        rank.stats.add(Stat::stream_edges);
        continue;
      }
      // None ended just before: a kernel of another stream that was running when it started,
      // ending sooner after that than the op was held back (the GPU was full).
      const GpuOpRef* x = nullptr;
      for (const auto& [other, w] : by_stream) {
        if (other == stream) continue;
        auto it = std::upper_bound(w.begin(), w.end(), k.start_ns, [&](TimeNs t, std::size_t a) {
          return t < in.gpu_ops[a].start_ns;
        });
        if (it == w.begin()) continue;
        const GpuOpRef& c = in.gpu_ops[*(it - 1)];
        if (c.gpu != k.gpu || !c.kernel || c.end_ns <= k.start_ns ||
            c.end_ns - k.start_ns >= k.start_ns - ready || (c.thread == k.thread && c.op > k.op))
          continue;
        if (x == nullptr || c.end_ns < x->end_ns) x = &c;
      }
      if (x == nullptr) {
        rank.stats.add(Stat::unexplained_waits);
        if (!hold_unexplained) continue;
        if (k.launch_op != core::kNoOp) {
          in.holds.push_back({k.op, k.gpu, std::max<TimeNs>(0, k.start_ns - k.launch_end_ns),
                              k.launch_op, k.launch_end_ns});
        } else {
          in.holds.push_back({k.op, k.gpu, k.start_ns - rank.launch_latency_ns});
        }

        continue;
      }
      p.ops[static_cast<std::size_t>(k.op)].deps.push_back({x->op, core::DepKind::kStreamWaits});
      rank.stats.add(Stat::occupancy_edges);
    }
  }
}

// A stream's ops run in the order they are issued. Where two threads launch on one stream (the
// loop and the autograd thread on the compute stream), a what-if that delays one thread could
// let the other issue first and put its op ahead in the queue, where it may wait for work the
// delayed thread issues later (a deadlock the measured run never had). So an op whose
// predecessor on its stream (by measured start) came from another thread is issued no earlier
// than that predecessor's launch call ended (kHostWaits), where the measured run agrees.
void launch_order_edges(core::Program& p, const EdgeInputs& in, const StreamIndex& idx,
                        ReplayProgram& out) {
  for (const auto& [stream, v] : idx.streams()) {
    for (std::size_t k = 1; k < v.size(); ++k) {
      const GpuOpRef& a = in.gpu_ops[v[k - 1]];
      const GpuOpRef& b = in.gpu_ops[v[k]];
      if (a.thread == b.thread || a.call_op == core::kNoOp || b.call_op == core::kNoOp ||
          a.call_end_ns > b.launch_ns)
        continue;
      p.ops[static_cast<std::size_t>(b.op)].deps.push_back({a.call_op, core::DepKind::kHostWaits});
      out.ranks[static_cast<std::size_t>(b.gpu)].stats.add(Stat::launch_order_waits);
    }
  }
}

void thread_edges(core::Program& p, const EdgeInputs& in, ReplayProgram& out) {
  const std::map<int, std::vector<std::size_t>> host_by_end = by_end(in.host_ops);
  for (const HostOpRef& h : in.host_ops) {
    if (!h.gap || h.idle_ns < (h.loop ? kLoopEdgeNs : kThreadEdgeNs)) continue;
    const std::ptrdiff_t j =
        latest(in.host_ops, host_by_end.at(h.gpu), std::max(h.start_ns, h.end_ns - kWakeNs),
               h.end_ns - 1, [&](const HostOpRef& y) { return y.thread != h.thread; });
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

// Helper threads for the holds. Absolute holds: one thread per GPU, HostWork up to each hold's
// time from the window's start, then the marker. Relative holds: threads shared by measured time
// (a thread takes a hold when its previous one's marker time has passed): each waits for the launch
// call, spends the measured delay, then issues the marker.
void hold_threads(core::Program& p, std::vector<Hold>& holds, const ReplayProgram& out) {
  auto new_thread = [&](int gpu, const char* name) {
    core::ThreadDesc td;
    td.id = static_cast<int>(p.threads.size());
    td.process = gpu;
    td.gpu = gpu;
    td.name = name;
    p.threads.push_back(td);
    return td.id;
  };
  auto emit = [&](int thread, int gpu, core::OpKind kind, TimeNs ns, const char* name,
                  const Hold& h) {
    core::Op op;
    op.id = static_cast<core::OpId>(p.ops.size());
    op.kind = kind;
    op.thread = thread;
    op.gpu = gpu;
    op.step = p.ops[static_cast<std::size_t>(h.op)].step;
    op.dispatch_ns = ns;
    op.name = p.names.intern(name);
    p.ops.push_back(std::move(op));
    return p.ops.back().id;
  };
  std::stable_sort(holds.begin(), holds.end(), [](const Hold& a, const Hold& b) {
    if (a.gpu != b.gpu) return a.gpu < b.gpu;
    return a.from_ns + a.at_ns < b.from_ns + b.at_ns;
  });
  int gpu = -1, abs_thread = -1;
  TimeNs cursor = 0;
  std::vector<std::pair<int, TimeNs>> pool;  // relative-hold threads of this GPU: (id, free at)
  for (const Hold& h : holds) {
    if (h.gpu != gpu) {
      gpu = h.gpu;
      abs_thread = -1;
      pool.clear();
      cursor = out.ranks[static_cast<std::size_t>(gpu)].window_start_ns;
    }
    core::OpId m = core::kNoOp;
    if (h.after == core::kNoOp) {
      if (abs_thread < 0) abs_thread = new_thread(gpu, "measured time (holds)");
      if (h.at_ns > cursor) {
        emit(abs_thread, gpu, core::OpKind::kHostWork, h.at_ns - cursor, "measured time", h);
        cursor = h.at_ns;
      }
      m = emit(abs_thread, gpu, core::OpKind::kMarker, 0, "hold", h);
    } else {
      std::size_t t = 0;
      while (t < pool.size() && pool[t].second > h.from_ns) ++t;
      if (t == pool.size()) pool.push_back({new_thread(gpu, "launch delay (holds)"), 0});
      pool[t].second = h.from_ns + h.at_ns;
      const core::OpId w =
          emit(pool[t].first, gpu, core::OpKind::kHostWork, h.at_ns, "measured delay", h);
      p.ops[static_cast<std::size_t>(w)].deps.push_back({h.after, core::DepKind::kHostWaits});
      m = emit(pool[t].first, gpu, core::OpKind::kMarker, 0, "hold", h);
    }
    p.ops[static_cast<std::size_t>(h.op)].deps.push_back({m, core::DepKind::kStreamWaits});
  }
}

}  // namespace

void infer_edges(core::Program& p, EdgeInputs& in, ReplayProgram& out, bool hold_unexplained) {
  const std::map<int, std::vector<std::size_t>> gpu_by_end = by_end(in.gpu_ops);
  const StreamIndex idx(in.gpu_ops);
  sync_edges(p, in, gpu_by_end, idx, out);
  launch_order_edges(p, in, idx, out);
  collective_wait_edges(p, in, out);
  stream_edges(p, in, gpu_by_end, out, hold_unexplained);
  thread_edges(p, in, out);
  hold_threads(p, in.holds, out);
}

}  // namespace csim::replay
