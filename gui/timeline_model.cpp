// Timeline model: lanes, nesting rows, folding and hit testing (timeline_model.hpp).
//
// Index: [SECTION] Build, [SECTION] Folding, [SECTION] Queries
#include "gui/timeline_model.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <map>
#include <tuple>
#include <unordered_map>

namespace csim::gui {
namespace {

std::uint64_t lane_key(std::int32_t pid, std::int32_t tid) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32 |
         static_cast<std::uint32_t>(tid);
}

// StepMark's rule (timeline_model.hpp): the step thread's spans, the union for steps it lacks,
// then tiled.
std::vector<StepMark> step_marks(const prof::Trace& trace,
                                 const std::vector<std::pair<std::int64_t, std::uint32_t>>& events,
                                 std::int32_t* step_pid, std::int32_t* step_tid) {
  if (events.empty()) return {};
  // The step thread: the smallest (no GPU index last, GPU index, pid, sort index, tid).
  auto order = [&](const prof::TraceEvent& e) {
    const prof::ProcessInfo* pi = trace.process(e.pid);
    const prof::ThreadInfo* ti = trace.thread(e.pid, e.tid);
    const int gpu = pi != nullptr ? pi->gpu : -1;
    return std::tuple(gpu < 0, gpu, e.pid, ti != nullptr ? ti->sort_index : 0, e.tid);
  };
  const prof::TraceEvent* ref = &trace.events[events.front().second];
  for (const auto& [n, i] : events) {
    if (order(trace.events[i]) < order(*ref)) ref = &trace.events[i];
  }
  *step_pid = ref->pid;
  *step_tid = ref->tid;
  std::map<std::int64_t, StepMark> own, all;
  auto widen = [](std::map<std::int64_t, StepMark>* into, std::int64_t n,
                  const prof::TraceEvent& e) {
    auto [it, fresh] = into->try_emplace(n, StepMark{n, e.ts_ns, e.ts_ns + e.dur_ns});
    if (!fresh) {
      it->second.start = std::min(it->second.start, e.ts_ns);
      it->second.end = std::max(it->second.end, e.ts_ns + e.dur_ns);
    }
  };
  for (const auto& [n, i] : events) {
    const prof::TraceEvent& e = trace.events[i];
    widen(&all, n, e);
    if (e.pid == ref->pid && e.tid == ref->tid) widen(&own, n, e);
  }
  std::vector<StepMark> out;
  for (const auto& [n, union_mark] : all) {
    const auto it = own.find(n);
    StepMark mark = it != own.end() ? it->second : union_mark;
    if (!out.empty() && mark.start < out.back().end)
      mark.start = std::min(out.back().end, mark.end);
    out.push_back(mark);
  }
  return out;
}

}  // namespace

bool profiler_step_number(std::string_view name, std::int64_t* n) {
  static constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix) return false;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  const auto r = std::from_chars(first, last, *n);
  return r.ec == std::errc() && r.ptr == last;
}

// [SECTION] Build
// -----------------------------------------------------------------------------------

int TimelineModel::lane_of(std::int32_t pid, std::int32_t tid) const {
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].pid == pid && lanes[i].tid == tid) return static_cast<int>(i);
  }
  return -1;
}

int TimelineModel::gpu_of(std::int32_t pid) const {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].pid == pid) return static_cast<int>(i);
  }
  return -1;
}

TimelineModel build_timeline(const prof::Trace& trace) {
  TimelineModel m;
  // Events per (pid, tid), in trace order; lanes are created in first-seen order, sorted below.
  std::unordered_map<std::uint64_t, int> lane_index;
  std::vector<std::vector<std::uint32_t>> members;
  std::vector<std::pair<std::int64_t, std::uint32_t>> step_events;  // (N, event index)
  bool any = false;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const prof::TraceEvent& e = trace.events[i];
    if (e.dur_ns < 0) continue;
    m.t_min = any ? std::min(m.t_min, e.ts_ns) : e.ts_ns;
    m.t_max = any ? std::max(m.t_max, e.ts_ns + e.dur_ns) : e.ts_ns + e.dur_ns;
    any = true;
    std::int64_t step = 0;
    if (e.cls == prof::EventClass::kAnnotation && profiler_step_number(e.name, &step)) {
      step_events.emplace_back(step, static_cast<std::uint32_t>(i));
      continue;
    }
    auto [it, fresh] =
        lane_index.try_emplace(lane_key(e.pid, e.tid), static_cast<int>(members.size()));
    if (fresh) {
      Lane lane;
      lane.pid = e.pid;
      lane.tid = e.tid;
      m.lanes.push_back(std::move(lane));
      members.emplace_back();
    }
    members[it->second].push_back(static_cast<std::uint32_t>(i));
  }

  m.steps = step_marks(trace, step_events, &m.step_pid, &m.step_tid);

  // Rows by nesting depth. Sorting by (start, longer first) puts a parent before the children that
  // start with it; the stack then holds the open ancestors of the current event.
  std::vector<Span> stack;
  for (std::size_t l = 0; l < m.lanes.size(); ++l) {
    Lane& lane = m.lanes[l];
    std::vector<std::uint32_t>& idx = members[l];
    std::stable_sort(idx.begin(), idx.end(), [&](std::uint32_t a, std::uint32_t b) {
      const prof::TraceEvent& ea = trace.events[a];
      const prof::TraceEvent& eb = trace.events[b];
      if (ea.ts_ns != eb.ts_ns) return ea.ts_ns < eb.ts_ns;
      return ea.dur_ns > eb.dur_ns;
    });
    stack.clear();
    for (const std::uint32_t i : idx) {
      const prof::TraceEvent& e = trace.events[i];
      const Span s{e.ts_ns, e.ts_ns + e.dur_ns, i, e.cls};
      while (!stack.empty() && stack.back().end <= s.start) stack.pop_back();
      const std::size_t depth = stack.size();
      if (lane.rows.size() <= depth) lane.rows.resize(depth + 1);
      lane.rows[depth].spans.push_back(s);
      lane.has_gil_wait = lane.has_gil_wait || s.cls == prof::EventClass::kGilWait;
      stack.push_back(s);
    }
    for (Row& r : lane.rows) index_row_classes(&r);
    lane.event_count = idx.size();
    m.event_count += idx.size();
    const prof::ThreadInfo* ti = trace.thread(lane.pid, lane.tid);
    if (ti != nullptr) {
      lane.name = ti->name.empty() ? "tid " + std::to_string(lane.tid) : ti->name;
      lane.role = ti->role;
    } else {
      lane.name = "tid " + std::to_string(lane.tid);
    }
  }

  // Groups. Lane order inside a process: GPU streams first, then host threads, each by the
  // trace's sort index, then tid.
  std::map<std::int32_t, std::vector<int>> lanes_by_pid;
  for (std::size_t l = 0; l < m.lanes.size(); ++l)
    lanes_by_pid[m.lanes[l].pid].push_back(static_cast<int>(l));
  auto sort_index = [&](const Lane& lane) {
    const prof::ThreadInfo* ti = trace.thread(lane.pid, lane.tid);
    return ti != nullptr ? ti->sort_index : 0;
  };
  for (auto& [pid, lane_ids] : lanes_by_pid) {
    std::sort(lane_ids.begin(), lane_ids.end(), [&](int a, int b) {
      const Lane& la = m.lanes[a];
      const Lane& lb = m.lanes[b];
      const bool ga = prof::is_gpu_lane(la.role), gb = prof::is_gpu_lane(lb.role);
      if (ga != gb) return ga;
      const int sa = sort_index(la), sb = sort_index(lb);
      if (sa != sb) return sa < sb;
      return la.tid < lb.tid;
    });
    GpuGroup g;
    g.pid = pid;
    g.lanes = lane_ids;
    const prof::ProcessInfo* pi = trace.process(pid);
    if (pi != nullptr) {
      g.name = pi->name;
      g.node = pi->node;
      g.gpu = pi->gpu;
    }
    if (g.name.empty()) g.name = "pid " + std::to_string(pid);
    m.gpus.push_back(std::move(g));
  }
  std::stable_sort(m.gpus.begin(), m.gpus.end(), [](const GpuGroup& a, const GpuGroup& b) {
    const bool ha = a.gpu >= 0, hb = b.gpu >= 0;
    if (ha != hb) return ha;
    if (a.gpu != b.gpu) return a.gpu < b.gpu;
    return a.pid < b.pid;
  });
  std::map<int, std::vector<int>> gpus_by_node;
  for (std::size_t g = 0; g < m.gpus.size(); ++g)
    gpus_by_node[m.gpus[g].node].push_back(static_cast<int>(g));
  for (auto& [node, ids] : gpus_by_node) {
    if (node < 0) continue;
    m.nodes.push_back(NodeGroup{node, "node " + std::to_string(node), ids});
  }
  if (auto it = gpus_by_node.find(-1); it != gpus_by_node.end()) {
    m.nodes.push_back(NodeGroup{-1, "processes", it->second});
  }
  return m;
}

// [SECTION] Folding
// ---------------------------------------------------------------------------------

void index_row_classes(Row* row) {
  row->classes.clear();
  row->class_time.clear();
  for (const Span& s : row->spans) {
    if (std::find(row->classes.begin(), row->classes.end(), s.cls) == row->classes.end())
      row->classes.push_back(s.cls);
  }
  const std::size_t c = row->classes.size();
  if (c < 2) return;  // one class: every fold has it, no sums needed
  std::array<int, prof::kEventClassCount> slot{};
  for (std::size_t k = 0; k < c; ++k) slot[static_cast<int>(row->classes[k])] = static_cast<int>(k);
  row->class_time.assign((row->spans.size() + 1) * c, 0);
  for (std::size_t i = 0; i < row->spans.size(); ++i) {
    const Span& s = row->spans[i];
    const TimeNs* prev = &row->class_time[i * c];
    TimeNs* next = &row->class_time[(i + 1) * c];
    std::copy_n(prev, c, next);
    next[slot[static_cast<int>(s.cls)]] += s.end - s.start;
  }
}

namespace {

// The class filling most of the fold spans[i, j) (time-weighted; ties to spans[i]'s class).
prof::EventClass fold_class(const Row& row, std::size_t i, std::size_t j) {
  const std::vector<Span>& s = row.spans;
  if (row.classes.size() == 1) return row.classes[0];
  std::array<TimeNs, prof::kEventClassCount> fill{};
  const std::size_t c = row.classes.size();
  if (c > 1 && row.class_time.size() == (s.size() + 1) * c) {
    for (std::size_t k = 0; k < c; ++k)
      fill[static_cast<int>(row.classes[k])] =
          row.class_time[j * c + k] - row.class_time[i * c + k];
  } else {
    for (std::size_t k = i; k < j; ++k) fill[static_cast<int>(s[k].cls)] += s[k].end - s[k].start;
  }
  prof::EventClass best = s[i].cls;
  for (int k = 0; k < prof::kEventClassCount; ++k) {
    if (fill[k] > fill[static_cast<int>(best)]) best = static_cast<prof::EventClass>(k);
  }
  return best;
}

// First index >= `from` whose span ends at or after `limit` (ends are sorted, so this is a
// partition point), searched outward from the guess `from + hint`. A fold advances by about the
// same number of spans at every step (min_px of trace time), so the previous step's advance is a
// good guess: the probe lands a few spans from the answer and the search touches one or two
// cache lines. Plain galloping from `from` touched every few lines of the whole row instead, and
// at 1M events a fitted view spent 5 ms a frame streaming the rows through the cache.
std::size_t first_end_at_least(const std::vector<Span>& s, std::size_t from, double limit,
                               std::size_t hint) {
  const std::size_t n = s.size();
  const auto before = [limit](const Span& x) { return static_cast<double>(x.end) < limit; };
  const std::size_t guess = std::min(from + std::max<std::size_t>(hint, 1), n);
  std::size_t lo = from, hi = guess;  // the answer lies in [lo, hi]
  if (guess < n && before(s[guess])) {
    // Past the guess: gallop forward, 1, 2, 4, ... spans.
    lo = guess + 1;
    std::size_t step = 1;
    while (lo + step - 1 < n && before(s[lo + step - 1])) {
      lo += step;
      step *= 2;
    }
    hi = std::min(lo + step - 1, n);
  } else {
    // At or before the guess: gallop backward while the probe still ends at or after `limit`.
    std::size_t step = 1;
    while (hi >= from + step && !before(s[hi - step])) {
      hi -= step;
      step *= 2;
    }
    lo = hi >= from + step ? hi - step + 1 : from;
  }
  const auto it = std::partition_point(s.begin() + static_cast<std::ptrdiff_t>(lo),
                                       s.begin() + static_cast<std::ptrdiff_t>(hi), before);
  return static_cast<std::size_t>(it - s.begin());
}

}  // namespace

void fold_row_into(const Row& row, const TimeView& view, double width_px, double min_px,
                   std::vector<DrawItem>* out) {
  const std::vector<Span>& s = row.spans;
  const double t0 = view.start_ns;
  const double t1 = view.end_ns(width_px);
  const double min_ns = min_px * view.ns_per_px;
  // First span ending after the window's start (ends are sorted because spans are disjoint).
  auto it = std::partition_point(s.begin(), s.end(),
                                 [t0](const Span& x) { return static_cast<double>(x.end) < t0; });
  std::size_t i = static_cast<std::size_t>(it - s.begin());
  const std::size_t n = s.size();
  while (i < n && static_cast<double>(s[i].start) <= t1) {
    const Span& a = s[i];
    const double len = static_cast<double>(a.end - a.start);
    if (len >= min_ns) {
      out->push_back(DrawItem{view.x_of(static_cast<double>(a.start)),
                              view.x_of(static_cast<double>(a.end)), static_cast<std::uint32_t>(i),
                              1, a.cls});
      ++i;
      continue;
    }
    // Fold: grow while the next span is also narrow and starts within min_ns of the fold's end.
    double fold_end = static_cast<double>(a.end);
    std::size_t j = i + 1;
    std::size_t advance = 1;  // spans swallowed by the last step: the next search's guess
    // Stop past the window's right edge: a fold running through a million off-screen events
    // would cost as much as drawing them.
    while (j < n && fold_end <= t1) {
      // Every span ending before fold_end + min_ns is swallowed wholesale (binary search).
      const double limit = fold_end + min_ns;
      const std::size_t k = first_end_at_least(s, j, limit, advance);
      if (k > j) fold_end = std::max(fold_end, static_cast<double>(s[k - 1].end));
      advance = k - j;
      // The search is a chain of dependent loads a couple of KB apart (one DRAM round trip per
      // step at 1M events); ask for the next steps' lines now so that they arrive in parallel.
      for (std::size_t ahead = 2; ahead <= 8; ++ahead) {
        const std::size_t p = k + ahead * advance;
        if (p < n) __builtin_prefetch(&s[p]);
      }
      j = k;
      if (j >= n) break;
      const Span& b = s[j];
      const bool narrow = static_cast<double>(b.end - b.start) < min_ns;
      const bool close = static_cast<double>(b.start) - fold_end < min_ns;
      if (!(narrow && close)) break;
      fold_end = static_cast<double>(b.end);
      ++j;
    }
    const double x0 = view.x_of(static_cast<double>(a.start));
    const double x1 = std::max(view.x_of(fold_end), x0 + 1.0);
    out->push_back(DrawItem{x0, x1, static_cast<std::uint32_t>(i),
                            static_cast<std::uint32_t>(j - i), fold_class(row, i, j)});
    i = j;
  }
}

std::vector<DrawItem> fold_row(const Row& row, const TimeView& view, double width_px,
                               double min_px) {
  std::vector<DrawItem> out;
  fold_row_into(row, view, width_px, min_px, &out);
  return out;
}

// [SECTION] Queries
// ---------------------------------------------------------------------------------

int span_at(const Row& row, double t_ns, double tolerance_ns) {
  const std::vector<Span>& s = row.spans;
  if (s.empty()) return -1;
  // First span whose end >= t: the candidate containing t; its predecessor may be nearest.
  const auto it = std::partition_point(
      s.begin(), s.end(), [t_ns](const Span& x) { return static_cast<double>(x.end) < t_ns; });
  const auto k = static_cast<std::ptrdiff_t>(it - s.begin());
  if (it != s.end() && static_cast<double>(it->start) <= t_ns) return static_cast<int>(k);
  double best = tolerance_ns;
  int found = -1;
  if (it != s.end() && static_cast<double>(it->start) - t_ns <= best) {
    best = static_cast<double>(it->start) - t_ns;
    found = static_cast<int>(k);
  }
  if (k > 0 && t_ns - static_cast<double>(s[k - 1].end) <= best) found = static_cast<int>(k - 1);
  return found;
}

std::vector<int> flows_of_event(const prof::Trace& trace, const prof::TraceEvent& e) {
  std::vector<int> out;
  const TimeNs end = e.ts_ns + e.dur_ns;
  for (std::size_t i = 0; i < trace.flows.size(); ++i) {
    const prof::FlowEvent& f = trace.flows[i];
    const bool from = f.from_pid == e.pid && f.from_tid == e.tid && f.from_ts_ns >= e.ts_ns &&
                      f.from_ts_ns <= end;
    const bool to =
        f.to_pid == e.pid && f.to_tid == e.tid && f.to_ts_ns >= e.ts_ns && f.to_ts_ns <= end;
    if (from || to) out.push_back(static_cast<int>(i));
  }
  return out;
}

namespace {

std::string arg_text(const prof::ArgValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.6g", *d);
    return buf;
  }
  return std::get<std::string>(v);
}

bool arg_number(const prof::TraceEvent& e, const char* key, double* out) {
  for (const prof::Arg& a : e.args) {
    if (a.key != key) continue;
    if (const auto* i = std::get_if<std::int64_t>(&a.value)) {
      *out = static_cast<double>(*i);
      return true;
    }
    if (const auto* d = std::get_if<double>(&a.value)) {
      *out = *d;
      return true;
    }
  }
  return false;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> event_details(const prof::Trace& trace,
                                                               const prof::TraceEvent& e,
                                                               TimeNs origin_ns,
                                                               bool include_all_args) {
  std::vector<std::pair<std::string, std::string>> d;
  d.emplace_back("name", e.name);
  d.emplace_back("class", prof::to_string(e.cls));
  if (!e.cat.empty()) d.emplace_back("category", e.cat);
  const prof::ProcessInfo* pi = trace.process(e.pid);
  const prof::ThreadInfo* ti = trace.thread(e.pid, e.tid);
  std::string lane = pi != nullptr && !pi->name.empty() ? pi->name : "pid " + std::to_string(e.pid);
  lane += " / ";
  lane += ti != nullptr && !ti->name.empty() ? ti->name : "tid " + std::to_string(e.tid);
  d.emplace_back("lane", lane);
  d.emplace_back("start", format_time(static_cast<double>(e.ts_ns - origin_ns)));
  d.emplace_back("duration", format_time(static_cast<double>(e.dur_ns)));
  const double secs = ns_to_s(e.dur_ns);
  double bytes = 0, flops = 0;
  if (arg_number(e, "bytes", &bytes)) {
    d.emplace_back("bytes", format_bytes(bytes));
    if (secs > 0) d.emplace_back("achieved", format_rate(bytes / secs, "B/s"));
  }
  if (arg_number(e, "flops", &flops)) {
    d.emplace_back("FLOPs", format_rate(flops, "FLOP"));
    if (secs > 0) d.emplace_back("achieved", format_rate(flops / secs, "FLOP/s"));
  }
  if (e.op_id >= 0) d.emplace_back("op id", std::to_string(e.op_id));
  if (e.correlation >= 0) d.emplace_back("correlation", std::to_string(e.correlation));
  if (include_all_args) {
    for (const prof::Arg& a : e.args) {
      if (a.key == "bytes" || a.key == "flops") continue;
      d.emplace_back(a.key, arg_text(a.value));
    }
  }
  return d;
}

}  // namespace csim::gui
