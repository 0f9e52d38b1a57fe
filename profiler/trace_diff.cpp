// Metrics extraction for tracediff: from a Trace (summary figures, per (GPU, lane role, op class)
// times, critical path) and from a summary JSON. Formulas: docs/tracediff.md, cited per section.
//
// Index:
//  [SECTION] Helpers
//  [SECTION] Window (docs/tracediff.md "Window")
//  [SECTION] Lanes and top-level events (docs/tracediff.md "Op-class times")
//  [SECTION] Critical path (docs/tracediff.md "Critical path")
//  [SECTION] extract_metrics
//  [SECTION] metrics_from_summary
#include "profiler/trace_diff.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "core/error.hpp"
#include "profiler/op_classes.hpp"
#include "profiler/summary.hpp"

namespace csim::prof {
namespace {

// [SECTION] Helpers ------------------------------------------------------------------------------

std::string gpu_key(std::size_t pos) {
  return "gpu" + std::to_string(pos);
}

void put(RunMetrics& r, const std::string& key, double v, Unit u, Better b, const char* family,
         bool per_gpu = false) {
  Metric m;
  m.value = v;
  m.unit = u;
  m.better = b;
  m.family = family;
  m.per_gpu = per_gpu;
  r.metrics[key] = std::move(m);
  r.families.insert(family);
}

// The figures both a Trace's summary and a summary JSON provide (docs/tracediff.md "Metrics":
// step_time, throughput, exposed_comm, comm_overlap, peak_memory, imbalance, split).
void put_summary_metrics(RunMetrics& r, const Summary& s) {
  put(r, "step_time", s.step_time_s, Unit::kSeconds, Better::kLower, kFamilyStep);
  if (s.samples_per_s > 0) {
    put(r, "throughput", s.samples_per_s, Unit::kPerSecond, Better::kHigher, kFamilyStep);
  }
  double exposed = 0, overlapped = 0;
  for (const GpuSummary& g : s.per_gpu) {
    exposed += g.exposed_comm_s;
    overlapped += g.overlapped_comm_s;
  }
  if (!s.per_gpu.empty()) {
    // exposed_comm = mean over GPUs of |comm \ compute| per step
    put(r, "exposed_comm", exposed / static_cast<double>(s.per_gpu.size()), Unit::kSeconds,
        Better::kLower, kFamilyComm);
    // comm_overlap = Σ|comm ∩ compute| / Σ|comm|, over GPUs (only when there is communication)
    if (exposed + overlapped > 0) {
      put(r, "comm_overlap", overlapped / (exposed + overlapped), Unit::kFraction, Better::kHigher,
          kFamilyComm);
    }
  }
  if (s.has_memory_data) {
    double peak_max = 0;
    for (std::size_t i = 0; i < s.per_gpu.size(); ++i) {
      const GpuSummary& g = s.per_gpu[i];
      if (!g.has_memory_data) continue;
      peak_max = std::max(peak_max, static_cast<double>(g.peak_bytes));
      put(r, "peak_memory/" + gpu_key(i), static_cast<double>(g.peak_bytes), Unit::kBytes,
          Better::kLower, kFamilyMemory, true);
    }
    put(r, "peak_memory/max", peak_max, Unit::kBytes, Better::kLower, kFamilyMemory);
    put(r, "imbalance", s.imbalance, Unit::kRatio, Better::kLower, kFamilyMemory);
  } else {
    r.notes.push_back("no memory data");
  }
  for (std::size_t i = 0; i < s.per_gpu.size(); ++i) {
    const GpuSummary& g = s.per_gpu[i];
    const std::string p = "split/" + gpu_key(i) + "/";
    put(r, p + "compute", g.compute_s, Unit::kSeconds, Better::kLower, kFamilySplit, true);
    put(r, p + "comm", g.comm_s, Unit::kSeconds, Better::kLower, kFamilySplit, true);
    put(r, p + "copy", g.copy_s, Unit::kSeconds, Better::kLower, kFamilySplit, true);
    put(r, p + "host_wait", g.host_wait_s, Unit::kSeconds, Better::kLower, kFamilySplit, true);
    put(r, p + "idle", g.idle_s, Unit::kSeconds, Better::kLower, kFamilySplit, true);
    r.gpus.push_back({g.name, g.rank, g.gpu});
  }
}

// [SECTION] Window -------------------------------------------------------------------------------

bool step_number(const std::string& name, std::int64_t* n) {
  static constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  const char* last = name.data() + name.size();
  const auto r = std::from_chars(name.data() + kPrefix.size(), last, *n);
  return r.ec == std::errc() && r.ptr == last;
}

struct Window {
  std::vector<std::pair<TimeNs, TimeNs>> spans;  // [from, to) per step in the window
  int steps = 0;
};

// docs/tracediff.md "Window" = docs/summary.md "Window": steps 2..N, step N spanning
// [end_{N−1}, end_N] when N−1 exists, else [start_N, end_N]; one step: [start_1, end_1]; no
// ProfilerStep#N: the whole trace.
Window find_window(const Trace& t) {
  std::map<std::int64_t, std::pair<TimeNs, TimeNs>> by_n;
  TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
  for (const TraceEvent& e : t.events) {
    lo = std::min(lo, e.ts_ns);
    hi = std::max(hi, e.ts_ns + e.dur_ns);
    std::int64_t n = 0;
    if (e.cat != "user_annotation" || !step_number(e.name, &n)) continue;
    auto [it, fresh] = by_n.try_emplace(n, e.ts_ns, e.ts_ns + e.dur_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, e.ts_ns);
      it->second.second = std::max(it->second.second, e.ts_ns + e.dur_ns);
    }
  }
  Window w;
  if (by_n.empty()) {
    if (lo <= hi) w.spans.emplace_back(lo, hi);
  } else {
    const std::int64_t* prev_n = nullptr;
    TimeNs prev_end = 0;
    for (const auto& [n, se] : by_n) {
      const bool chained = prev_n != nullptr && n == *prev_n + 1;
      if (by_n.size() == 1 || prev_n != nullptr) {
        w.spans.emplace_back(chained ? prev_end : se.first, se.second);
      }
      prev_n = &n;
      prev_end = se.second;
    }
  }
  w.steps = static_cast<int>(w.spans.size());
  return w;
}

// |[a, b) ∩ window|
TimeNs overlap(const Window& w, TimeNs a, TimeNs b) {
  TimeNs sum = 0;
  for (const auto& [from, to] : w.spans) {
    const TimeNs lo = std::max(a, from), hi = std::min(b, to);
    if (hi > lo) sum += hi - lo;
  }
  return sum;
}

// [SECTION] Lanes and top-level events -----------------------------------------------------------

struct Lane {
  std::int32_t pid = 0, tid = 0;
  LaneRole role = LaneRole::kOther;
  int gpu_pos = -1;                // position of the GPU the lane belongs to (-1: none)
  std::vector<std::uint32_t> top;  // indices of its top-level timed events, by start
};

std::uint64_t lane_id(std::int32_t pid, std::int32_t tid) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32) |
         static_cast<std::uint32_t>(tid);
}

// docs/tracediff.md "Op-class times": per lane, events sorted by (start, longest first); an event
// starting before the previous top-level event ends is nested in it (Kineto's aten::linear around
// aten::addmm around cudaLaunchKernel) and is not counted again.
std::vector<Lane> build_lanes(const Trace& t, const std::vector<std::string_view>& cls,
                              std::unordered_map<std::uint64_t, std::size_t>* index) {
  std::vector<std::uint32_t> order;
  order.reserve(t.events.size());
  for (std::uint32_t i = 0; i < t.events.size(); ++i) {
    if (!cls[i].empty() && t.events[i].dur_ns >= 0) order.push_back(i);
  }
  const auto before = [&](std::uint32_t a, std::uint32_t b) {
    const TraceEvent& x = t.events[a];
    const TraceEvent& y = t.events[b];
    if (x.pid != y.pid) return x.pid < y.pid;
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.ts_ns != y.ts_ns) return x.ts_ns < y.ts_ns;
    if (x.dur_ns != y.dur_ns) return x.dur_ns > y.dur_ns;
    return a < b;
  };
  // Our writer's files come in (pid, tid, ts) order: checking is O(n), sorting is not needed.
  if (!std::is_sorted(order.begin(), order.end(), before)) {
    std::sort(order.begin(), order.end(), before);
  }
  std::vector<Lane> lanes;
  TimeNs top_end = 0;
  for (const std::uint32_t i : order) {
    const TraceEvent& e = t.events[i];
    if (lanes.empty() || lanes.back().pid != e.pid || lanes.back().tid != e.tid) {
      Lane l;
      l.pid = e.pid;
      l.tid = e.tid;
      if (const ThreadInfo* ti = t.thread(e.pid, e.tid)) l.role = ti->role;
      (*index)[lane_id(e.pid, e.tid)] = lanes.size();
      lanes.push_back(std::move(l));
      top_end = std::numeric_limits<TimeNs>::min();
    }
    if (e.ts_ns < top_end) continue;  // nested in the current top-level event
    lanes.back().top.push_back(i);
    top_end = e.ts_ns + e.dur_ns;
  }
  return lanes;
}

// [SECTION] Critical path ------------------------------------------------------------------------

// docs/tracediff.md "Critical path". Walks back from the last GPU work to end in the window: at
// each event, the predecessor that became ready last (the previous top-level event on its lane,
// the source of a flow ending in it, or the GPU work of its GPU that ended last before it started)
// is what bound its start; the time between that readiness and the event's start is "wait".
// Attributed time is clipped to [window start, window end], so the categories sum to that span
// exactly.
struct CriticalPath {
  bool computed = false;
  std::array<TimeNs, 5> ns{};      // compute, communication, copy, host, wait
  std::int64_t unbound_flows = 0;  // flows whose ends lie on no timed event
};

int path_slot(EventClass c) {
  switch (c) {
    case EventClass::kCompute:
      return 0;
    case EventClass::kCommunication:
      return 1;
    case EventClass::kCopy:
      return 2;
    default:
      return 3;
  }
}

CriticalPath critical_path(const Trace& t, const std::vector<Lane>& lanes,
                           const std::unordered_map<std::uint64_t, std::size_t>& index,
                           const Window& w) {
  CriticalPath cp;
  if (t.flows.empty() || w.spans.empty() || lanes.empty()) return cp;
  const TimeNs w_start = w.spans.front().first, w_end = w.spans.back().second;
  // Node = (lane, position in lane.top). Map event index → node.
  struct Node {
    std::uint32_t lane, pos;
  };
  std::vector<Node> node_of(t.events.size(), Node{0, 0});
  for (std::uint32_t li = 0; li < lanes.size(); ++li) {
    for (std::uint32_t p = 0; p < lanes[li].top.size(); ++p) node_of[lanes[li].top[p]] = {li, p};
  }
  // Last top-level event on lane LI starting at or before TS (-1: none). The lanes' start times
  // are searched in contiguous copies, from where the previous search on the lane ended (flows
  // come in time order on a lane), with a binary search when that guess is wrong.
  std::vector<std::vector<TimeNs>> starts(lanes.size());
  for (std::size_t li = 0; li < lanes.size(); ++li) {
    starts[li].reserve(lanes[li].top.size());
    for (const std::uint32_t i : lanes[li].top) starts[li].push_back(t.events[i].ts_ns);
  }
  std::vector<std::size_t> guess(lanes.size(), 0);
  auto at_or_before = [&](std::size_t li, TimeNs ts) -> std::int64_t {
    const std::vector<TimeNs>& v = starts[li];
    const auto is_answer = [&](std::size_t k) {
      return k < v.size() && v[k] <= ts && (k + 1 == v.size() || v[k + 1] > ts);
    };
    std::size_t& g = guess[li];
    if (is_answer(g)) return static_cast<std::int64_t>(g);
    if (is_answer(g + 1)) return static_cast<std::int64_t>(++g);
    const auto it = std::upper_bound(v.begin(), v.end(), ts);
    if (it == v.begin()) return -1;
    g = static_cast<std::size_t>(it - v.begin()) - 1;
    return static_cast<std::int64_t>(g);
  };
  struct Incoming {
    std::uint32_t src_event;
    TimeNs ready;
  };
  std::vector<std::pair<std::uint32_t, Incoming>> incoming;  // (dest event, source), by dest
  for (const FlowEvent& f : t.flows) {
    const auto from = index.find(lane_id(f.from_pid, f.from_tid));
    const auto to = index.find(lane_id(f.to_pid, f.to_tid));
    if (from == index.end() || to == index.end()) {
      ++cp.unbound_flows;
      continue;
    }
    const Lane& lf = lanes[from->second];
    const Lane& lt = lanes[to->second];
    const std::int64_t s = at_or_before(from->second, f.from_ts_ns);
    const std::int64_t d = at_or_before(to->second, f.to_ts_ns);
    if (s < 0 || d < 0) {
      ++cp.unbound_flows;
      continue;
    }
    const TraceEvent& dst = t.events[lt.top[d]];
    if (f.to_ts_ns > dst.ts_ns + dst.dur_ns) {  // the flow ends between events: binds to nothing
      ++cp.unbound_flows;
      continue;
    }
    const TraceEvent& src = t.events[lf.top[s]];
    incoming.push_back(
        {lt.top[d], Incoming{lf.top[s], std::min(f.from_ts_ns, src.ts_ns + src.dur_ns)}});
  }
  std::sort(incoming.begin(), incoming.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // GPU work per GPU position, by end time: the implicit predecessors.
  // A lane's top-level events mostly end in start order: each lane's run is sorted (a check when
  // it already is) and merged into its GPU's list. The pairs are distinct (event index), so this
  // is the order one sort of the whole list gives.
  std::map<int, std::vector<std::pair<TimeNs, std::uint32_t>>> gpu_ends;
  for (const Lane& l : lanes) {
    if (l.gpu_pos < 0) continue;
    auto& v = gpu_ends[l.gpu_pos];
    const auto from = static_cast<std::ptrdiff_t>(v.size());
    for (const std::uint32_t i : l.top) {
      if (is_gpu_work(t.events[i].cls)) v.emplace_back(t.events[i].ts_ns + t.events[i].dur_ns, i);
    }
    if (!std::is_sorted(v.begin() + from, v.end())) std::sort(v.begin() + from, v.end());
    std::inplace_merge(v.begin(), v.begin() + from, v.end());
  }
  // Start: among the events overlapping the window, the GPU work (kernel, copy) with the latest
  // end clipped to the window end (what finishes the step on the GPUs); host events only when the
  // trace has no GPU work there. A host thread's gaps are mostly waits for the GPU that the trace
  // does not record, so starting on the GPU keeps the path on what the flows explain.
  std::int64_t cur = -1;
  TimeNs cursor = std::numeric_limits<TimeNs>::min();
  for (const bool gpu_only : {true, false}) {
    for (const Lane& l : lanes) {
      for (const std::uint32_t i : l.top) {
        const TraceEvent& e = t.events[i];
        if (e.ts_ns >= w_end || e.ts_ns + e.dur_ns <= w_start) continue;
        if (gpu_only && !is_gpu_work(e.cls)) continue;
        const TimeNs end = std::min(e.ts_ns + e.dur_ns, w_end);
        if (end > cursor) {
          cursor = end;
          cur = i;
        }
      }
    }
    if (cur >= 0) break;
  }
  if (cur < 0) return cp;
  cp.computed = true;
  // Each iteration moves to a different event whose attributed end is ≤ the current start; the
  // cap only guards against zero-length cycles in malformed flows.
  const std::size_t cap = t.events.size() + t.flows.size() + 1;
  for (std::size_t iter = 0; iter < cap; ++iter) {
    const TraceEvent& e = t.events[static_cast<std::size_t>(cur)];
    const TimeNs start = std::max(e.ts_ns, w_start);
    if (cursor > start) cp.ns[path_slot(e.cls)] += cursor - start;
    if (e.ts_ns <= w_start) break;
    std::int64_t best = -1;
    TimeNs best_ready = std::numeric_limits<TimeNs>::min();
    const Node n = node_of[static_cast<std::size_t>(cur)];
    if (n.pos > 0) {
      const std::uint32_t prev = lanes[n.lane].top[n.pos - 1];
      best = prev;
      best_ready = t.events[prev].ts_ns + t.events[prev].dur_ns;
    }
    const auto first = std::lower_bound(
        incoming.begin(), incoming.end(), static_cast<std::uint32_t>(cur),
        [](const std::pair<std::uint32_t, Incoming>& a, std::uint32_t v) { return a.first < v; });
    for (auto it = first; it != incoming.end() && it->first == static_cast<std::uint32_t>(cur);
         ++it) {
      {
        const Incoming& in = it->second;
        if (in.src_event == static_cast<std::uint32_t>(cur)) continue;
        if (in.ready > best_ready) {
          best_ready = in.ready;
          best = in.src_event;
        }
      }
    }
    // Implicit predecessor: the GPU work of the same GPU that ended last at or before this
    // event's start, when it ended after every recorded predecessor became ready: a stream
    // waiting on another stream's CUDA event, or a host thread synchronising with the GPU.
    if (const auto g = gpu_ends.find(lanes[n.lane].gpu_pos); g != gpu_ends.end()) {
      const auto& v = g->second;
      auto it = std::upper_bound(
          v.begin(), v.end(), std::make_pair(e.ts_ns, std::numeric_limits<std::uint32_t>::max()));
      while (it != v.begin()) {
        --it;
        if (it->second == static_cast<std::uint32_t>(cur)) continue;
        if (it->first > best_ready) {
          best_ready = it->first;
          best = it->second;
        }
        break;
      }
    }
    if (best < 0 || best_ready <= w_start) {  // nothing earlier binds it: the rest is waiting
      cp.ns[4] += e.ts_ns - w_start;
      break;
    }
    best_ready = std::min(best_ready, e.ts_ns);  // clock skew: a source "after" its destination
    cp.ns[4] += e.ts_ns - best_ready;
    cur = best;
    cursor = best_ready;
  }
  return cp;
}

}  // namespace

// [SECTION] extract_metrics ----------------------------------------------------------------------

RunMetrics extract_metrics(const Trace& trace, const std::string& source) {
  RunMetrics r;
  r.source = source;
  r.kind = "trace";
  r.world_size = trace.world_size;
  const Summary s = summarize(trace);
  put_summary_metrics(r, s);
  for (const std::string& n : s.notes) {
    if (n != "no memory data") r.notes.push_back(n);
  }

  // GPU positions: summary order (by pid). Lanes of other processes (Kineto's host process)
  // belong to the GPU whose rank is the process's, when exactly one GPU has it.
  std::map<std::int32_t, int> pos_of_pid;
  std::map<int, std::vector<int>> pos_of_rank;
  for (std::size_t i = 0; i < s.per_gpu.size(); ++i) {
    pos_of_pid[s.per_gpu[i].pid] = static_cast<int>(i);
    pos_of_rank[s.per_gpu[i].rank].push_back(static_cast<int>(i));
  }
  std::vector<std::string_view> cls(trace.events.size());
  // op_class() lower-cases names for its rules; a trace repeats a few hundred names a million
  // times, so events without class args are classified once per (class, name).
  std::array<std::unordered_map<std::string_view, std::string_view>, kEventClassCount> by_name;
  std::unordered_map<std::string_view, std::string_view> host_by_cat;  // host: by category alone
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.cls == EventClass::kHost) {
      const auto it = host_by_cat.find(e.cat);
      cls[i] = it != host_by_cat.end() ? it->second
                                       : host_by_cat.emplace(e.cat, op_class(e)).first->second;
      continue;
    }
    const bool class_arg = std::any_of(e.args.begin(), e.args.end(), [](const Arg& a) {
      return a.key == "kind" || a.key == "copy_kind" || a.key == "Collective name";
    });
    if (class_arg || !is_gpu_work(e.cls)) {
      cls[i] = op_class(e);
      continue;
    }
    auto& m = by_name[static_cast<int>(e.cls)];
    const auto it = m.find(e.name);
    cls[i] = it != m.end() ? it->second : m.emplace(e.name, op_class(e)).first->second;
  }
  std::unordered_map<std::uint64_t, std::size_t> index;
  std::vector<Lane> lanes = build_lanes(trace, cls, &index);
  const Window w = find_window(trace);

  // docs/tracediff.md "Op-class times": time/gpuN/ROLE/CLASS = Σ |top-level event ∩ W| / steps.
  // Keys are assembled once per (GPU, role, class) and (role, name), not once per event.
  std::map<std::tuple<int, std::string, std::string_view>, TimeNs> per_gpu_ns;
  std::map<std::pair<std::string, std::string_view>, TimeNs> mean_ns;
  std::array<std::unordered_map<std::string_view, TimeNs>, 5> names_ns;  // per LaneRole
  std::int64_t unattributed = 0;
  for (Lane& l : lanes) {
    if (const auto it = pos_of_pid.find(l.pid); it != pos_of_pid.end()) {
      l.gpu_pos = it->second;
    } else if (s.per_gpu.size() == 1) {
      l.gpu_pos = 0;
    } else if (const ProcessInfo* p = trace.process(l.pid)) {
      const auto rt = pos_of_rank.find(p->rank);
      if (rt != pos_of_rank.end() && rt->second.size() == 1) l.gpu_pos = rt->second[0];
    }
    const std::string role = to_string(l.role);
    std::map<std::string_view, TimeNs> lane_ns;  // class → time on this lane
    auto& names = names_ns[static_cast<int>(l.role)];
    for (const std::uint32_t i : l.top) {
      const TraceEvent& e = trace.events[i];
      const TimeNs in_window = overlap(w, e.ts_ns, e.ts_ns + e.dur_ns);
      if (in_window <= 0) continue;
      if (l.gpu_pos < 0) {
        ++unattributed;
        continue;
      }
      lane_ns[cls[i]] += in_window;
      names[e.name] += in_window;
    }
    for (const auto& [c, ns] : lane_ns) {
      per_gpu_ns[{l.gpu_pos, role, c}] += ns;
      mean_ns[{role, c}] += ns;
    }
  }
  const double per_step = w.steps > 0 ? 1.0 / w.steps : 0.0;
  if (!s.per_gpu.empty()) {
    r.families.insert(kFamilyTime);
    for (const auto& [k, ns] : per_gpu_ns) {
      const auto& [pos, role, c] = k;
      put(r, "time/" + gpu_key(static_cast<std::size_t>(pos)) + "/" + role + "/" + std::string(c),
          ns_to_s(ns) * per_step, Unit::kSeconds, Better::kLower, kFamilyTime, true);
    }
    // time/mean/ROLE/CLASS = Σ over GPUs / number of GPUs
    const double gpus = static_cast<double>(s.per_gpu.size());
    for (const auto& [k, ns] : mean_ns) {
      put(r, "time/mean/" + k.first + "/" + std::string(k.second), ns_to_s(ns) * per_step / gpus,
          Unit::kSeconds, Better::kLower, kFamilyTime);
    }
    for (int role = 0; role < 5; ++role) {
      const std::string prefix = std::string(to_string(static_cast<LaneRole>(role))) + " ";
      for (const auto& [name, ns] : names_ns[role]) {
        r.op_names[prefix + std::string(name)] += ns_to_s(ns) * per_step / gpus;
      }
    }
  }
  if (unattributed > 0) {
    r.notes.push_back(
        std::to_string(unattributed) +
        " events on processes that name no single GPU were left out of op-class times");
  }

  const CriticalPath cp = critical_path(trace, lanes, index, w);
  if (cp.computed) {
    static constexpr const char* kSlots[] = {"compute", "communication", "copy", "host", "wait"};
    r.families.insert(kFamilyCritical);
    for (int i = 0; i < 5; ++i) {
      put(r, std::string("critical_path/") + kSlots[i], ns_to_s(cp.ns[i]) * per_step,
          Unit::kSeconds, Better::kLower, kFamilyCritical);
    }
  } else if (trace.flows.empty()) {
    r.notes.push_back("no dependency flows: critical path not computed");
  }
  return r;
}

// [SECTION] metrics_from_summary -----------------------------------------------------------------

bool is_summary_json(const nlohmann::json& j) {
  return j.is_object() && j.contains("step_time_s") && j.contains("per_gpu") &&
         !j.contains("traceEvents");
}

RunMetrics metrics_from_summary(const nlohmann::json& j, const std::string& source) {
  auto number = [&](const nlohmann::json& o, const char* key, const std::string& path) -> double {
    const auto it = o.find(key);
    if (it == o.end() || !it->is_number()) {
      throw InputError(source, path + "." + key, "missing or not a number",
                       "pass a summary written by `simrun --summary`, or a trace");
    }
    return it->get<double>();
  };
  if (!is_summary_json(j)) {
    throw InputError(source, "", "not a summary JSON (no step_time_s / per_gpu)",
                     "pass a summary written by `simrun --summary`, or a trace");
  }
  const nlohmann::json& gpus = j["per_gpu"];
  if (!gpus.is_array()) throw InputError(source, "per_gpu", "not an array");
  Summary s;
  s.step_time_s = number(j, "step_time_s", "");
  s.samples_per_s = j.contains("samples_per_s") ? number(j, "samples_per_s", "") : 0.0;
  s.imbalance = j.contains("imbalance") ? number(j, "imbalance", "") : 0.0;
  s.has_memory_data = j.value("has_memory_data", false);
  std::map<int, std::size_t> row_of_gpu;
  std::vector<std::pair<std::size_t, int>> mirrored;  // (row, representative GPU)
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const nlohmann::json& g = gpus[i];
    const std::string path = "per_gpu[" + std::to_string(i) + "]";
    if (!g.is_object()) throw InputError(source, path, "not an object");
    GpuSummary gs;
    gs.name = g.value("name", gpu_key(i));
    gs.rank = g.contains("rank") && g["rank"].is_number_integer() ? g["rank"].get<int>() : -1;
    gs.gpu = g.contains("gpu") && g["gpu"].is_number_integer() ? g["gpu"].get<int>() : -1;
    row_of_gpu[gs.gpu] = i;
    if (g.contains("mirror_of")) {
      // Rank symmetry: the row repeats its representative's figures (filled in below).
      if (!g["mirror_of"].is_number_integer())
        throw InputError(source, path + ".mirror_of", "not an integer GPU index");
      mirrored.emplace_back(i, g["mirror_of"].get<int>());
      s.per_gpu.push_back(std::move(gs));
      continue;
    }
    gs.has_memory_data = g.value("has_memory_data", false);
    gs.peak_bytes = static_cast<Bytes>(number(g, "peak_bytes", path));
    gs.compute_s = number(g, "compute_s", path);
    gs.comm_s = number(g, "comm_s", path);
    gs.copy_s = number(g, "copy_s", path);
    gs.host_wait_s = number(g, "host_wait_s", path);
    gs.idle_s = number(g, "idle_s", path);
    gs.exposed_comm_s = number(g, "exposed_comm_s", path);
    gs.overlapped_comm_s = number(g, "overlapped_comm_s", path);
    s.per_gpu.push_back(std::move(gs));
  }
  for (const auto& [row, rep] : mirrored) {
    const auto it = row_of_gpu.find(rep);
    const std::string path = "per_gpu[" + std::to_string(row) + "].mirror_of";
    if (it == row_of_gpu.end() || gpus[it->second].contains("mirror_of"))
      throw InputError(source, path, "names no simulated GPU of this summary");
    GpuSummary& m = s.per_gpu[row];
    GpuSummary copy = s.per_gpu[it->second];  // the figures; the identity stays the row's
    copy.name = m.name;
    copy.rank = m.rank;
    copy.gpu = m.gpu;
    copy.mirror_of = rep;
    m = std::move(copy);
  }
  RunMetrics r;
  r.source = source;
  r.kind = "summary";
  r.world_size = static_cast<int>(s.per_gpu.size());
  put_summary_metrics(r, s);
  if (j.contains("notes") && j["notes"].is_array()) {
    for (const auto& n : j["notes"]) {
      if (n.is_string() && n.get<std::string>() != "no memory data") r.notes.push_back(n);
    }
  }
  return r;
}

}  // namespace csim::prof
