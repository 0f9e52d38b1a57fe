// Communication per process group (comm_by_group.hpp; docs/summary.md, "Communication by group").
#include "profiler/comm_by_group.hpp"

#include <algorithm>
#include <cstdint>

namespace csim::prof {

std::string group_label(const TraceEvent& e) {
  const std::string* s = string_arg(e, "Process Group Description");
  if (s == nullptr || s->empty() || *s == "undefined") s = string_arg(e, "Process Group Name");
  if (s == nullptr || s->empty()) return "unnamed";
  return s->substr(0, s->find(' '));
}

std::vector<GroupComm> comm_by_group(const std::vector<const TraceEvent*>& events,
                                     const std::vector<std::pair<TimeNs, TimeNs>>& window,
                                     double per_step) {
  // A sweep over the boundaries of the window's intervals, the compute events and each group's
  // events: an elementary segment inside the window adds its length to every group with an event
  // running, and to its exposed time when no compute runs.
  constexpr int kWindow = -2, kCompute = -1;  // a point's kind; >= 0: a group's index
  struct Point {
    TimeNs t;
    int kind;
    int delta;
  };
  std::vector<Point> pts;
  std::vector<GroupComm> out;
  for (const TraceEvent* e : events) {
    if (e->dur_ns <= 0) continue;
    int kind = 0;
    if (e->cls == EventClass::kCompute) {
      kind = kCompute;
    } else if (e->cls == EventClass::kCommunication) {
      const std::string label = group_label(*e);
      const auto at = std::find_if(out.begin(), out.end(),
                                   [&](const GroupComm& g) { return g.group == label; });
      kind = static_cast<int>(at - out.begin());
      if (at == out.end()) out.push_back(GroupComm{label});
    } else {
      continue;
    }
    pts.push_back({e->ts_ns, kind, +1});
    pts.push_back({e->ts_ns + e->dur_ns, kind, -1});
  }
  if (out.empty()) return out;
  for (const auto& [start, end] : window) {
    if (end <= start) continue;
    pts.push_back({start, kWindow, +1});
    pts.push_back({end, kWindow, -1});
  }
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.t < b.t; });
  std::vector<int> running(out.size(), 0);
  std::vector<TimeNs> comm(out.size(), 0), exposed(out.size(), 0);
  int in_window = 0, computing = 0;
  for (std::size_t i = 0; i < pts.size();) {
    const TimeNs t = pts[i].t;
    for (; i < pts.size() && pts[i].t == t; ++i) {
      const Point& p = pts[i];
      if (p.kind == kWindow) {
        in_window += p.delta;
      } else if (p.kind == kCompute) {
        computing += p.delta;
      } else {
        running[static_cast<std::size_t>(p.kind)] += p.delta;
      }
    }
    if (i == pts.size() || in_window <= 0) continue;
    const TimeNs len = pts[i].t - t;
    for (std::size_t g = 0; g < out.size(); ++g) {
      if (running[g] <= 0) continue;
      comm[g] += len;
      if (computing <= 0) exposed[g] += len;
    }
  }
  for (std::size_t g = 0; g < out.size(); ++g) {
    out[g].comm_s = ns_to_s(comm[g]) * per_step;
    out[g].exposed_s = ns_to_s(exposed[g]) * per_step;
  }
  // Groups with no time inside the window are dropped.
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const GroupComm& g) { return g.comm_s <= 0; }),
      out.end());
  return out;
}

void add_comm_by_group(std::vector<GroupComm>& total, const std::vector<GroupComm>& gpu,
                       int weight) {
  for (const GroupComm& g : gpu) {
    auto at = std::find_if(total.begin(), total.end(),
                           [&](const GroupComm& t) { return t.group == g.group; });
    if (at == total.end()) at = total.insert(total.end(), GroupComm{g.group});
    at->comm_s += g.comm_s * weight;
    at->exposed_s += g.exposed_s * weight;
  }
}

}  // namespace csim::prof
