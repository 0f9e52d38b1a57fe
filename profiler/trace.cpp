// Trace model helpers: names of the enums as written in traces (docs/trace-format.md) and the
// process / thread lookups.
#include "profiler/trace.hpp"

namespace csim::prof {

const char* to_string(EventClass c) {
  switch (c) {
    case EventClass::kCompute:
      return "compute";
    case EventClass::kCommunication:
      return "communication";
    case EventClass::kCopy:
      return "copy";
    case EventClass::kHost:
      return "host";
    case EventClass::kGilWait:
      return "gil_wait";
    case EventClass::kAnnotation:
      return "annotation";
    case EventClass::kOther:
      return "other";
  }
  return "other";
}

bool parse_event_class(const std::string& s, EventClass* out) {
  for (int i = 0; i < kEventClassCount; ++i) {
    const auto c = static_cast<EventClass>(i);
    if (s == to_string(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

std::string gpu_process_name(int gpu, int gpus_per_node) {
  if (gpus_per_node <= 0) return "GPU " + std::to_string(gpu);
  return "node " + std::to_string(gpu / gpus_per_node) + " / GPU " +
         std::to_string(gpu % gpus_per_node);
}

const char* to_string(LaneRole r) {
  switch (r) {
    case LaneRole::kCompute:
      return "compute";
    case LaneRole::kComm:
      return "comm";
    case LaneRole::kCopy:
      return "copy";
    case LaneRole::kHost:
      return "host";
    case LaneRole::kOther:
      return "other";
  }
  return "other";
}

bool parse_lane_role(const std::string& s, LaneRole* out) {
  for (const LaneRole r :
       {LaneRole::kCompute, LaneRole::kComm, LaneRole::kCopy, LaneRole::kHost, LaneRole::kOther}) {
    if (s == to_string(r)) {
      *out = r;
      return true;
    }
  }
  return false;
}

// Linear scans: a trace has a handful of processes and threads; hot paths (writer, summary)
// build their own maps.
const ProcessInfo* Trace::process(std::int32_t pid) const {
  for (const ProcessInfo& p : processes) {
    if (p.pid == pid) return &p;
  }
  return nullptr;
}

const ThreadInfo* Trace::thread(std::int32_t pid, std::int32_t tid) const {
  for (const ThreadInfo& t : threads) {
    if (t.pid == pid && t.tid == tid) return &t;
  }
  return nullptr;
}

}  // namespace csim::prof
