// docs/real-execution.md, "Timestamps and causality".
#include "backends/common/launch_order.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace csim::backend {
namespace {

bool is_device(prof::EventClass c) {
  return c == prof::EventClass::kCompute || c == prof::EventClass::kCommunication ||
         c == prof::EventClass::kCopy;
}
bool is_launch(const prof::TraceEvent& e) {
  return e.cat == "cuda_runtime" || e.cat == "cuda_driver";
}

}  // namespace

TimeNs clamp_device_events_to_launches(prof::Trace* trace) {
  std::unordered_map<std::int64_t, TimeNs> launch_ts;  // correlation -> launch start
  for (const prof::TraceEvent& e : trace->events) {
    if (e.correlation >= 0 && is_launch(e)) {
      const auto [it, fresh] = launch_ts.try_emplace(e.correlation, e.ts_ns);
      if (!fresh) it->second = std::min(it->second, e.ts_ns);
    }
  }
  // (pid, tid, old start) -> new start, for the flows that end at a moved event; and per lane
  // the moved events' old [start, end) and new start, for the flows that leave one.
  std::map<std::tuple<std::int32_t, std::int32_t, TimeNs>, TimeNs> moved;
  struct Moved {
    TimeNs old_start, old_end, new_start, new_end;
  };
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<Moved>> moved_on_lane;
  TimeNs residual = 0;
  for (prof::TraceEvent& e : trace->events) {
    if (e.correlation < 0 || !is_device(e.cls)) continue;
    const auto it = launch_ts.find(e.correlation);
    if (it == launch_ts.end() || e.ts_ns >= it->second) continue;
    residual = std::max(residual, it->second - e.ts_ns);
    const TimeNs end = e.ts_ns + e.dur_ns;
    moved[{e.pid, e.tid, e.ts_ns}] = it->second;
    const TimeNs old_start = e.ts_ns;
    e.ts_ns = it->second;
    e.dur_ns = std::max<TimeNs>(end - e.ts_ns, 0);
    moved_on_lane[{e.pid, e.tid}].push_back({old_start, end, e.ts_ns, e.ts_ns + e.dur_ns});
  }
  if (moved.empty()) return 0;
  for (prof::FlowEvent& f : trace->flows) {
    const auto it = moved.find({f.to_pid, f.to_tid, f.to_ts_ns});
    if (it != moved.end()) f.to_ts_ns = it->second;
    // A flow leaving a moved event (a cross-GPU dependency) leaves its new span.
    const auto lane = moved_on_lane.find({f.from_pid, f.from_tid});
    if (lane == moved_on_lane.end()) continue;
    for (const Moved& m : lane->second) {
      if (f.from_ts_ns >= m.old_start && f.from_ts_ns < std::max(m.old_end, m.old_start + 1)) {
        f.from_ts_ns = std::clamp(f.from_ts_ns, m.new_start, std::max(m.new_start, m.new_end - 1));
        break;
      }
    }
  }
  return residual;
}

}  // namespace csim::backend
