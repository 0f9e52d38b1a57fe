// Kineto category / name → EventClass, and lane-role inference (docs/trace-format.md,
// "Classes and roles").
#include "profiler/trace_classify.hpp"

#include <cctype>

namespace csim::prof {
namespace {

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// `needle` must be lower-case.
bool icontains(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    std::size_t j = 0;
    while (j < needle.size() && lower(hay[i + j]) == needle[j]) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

bool is_collective_kernel(std::string_view name) {
  // "nccl" also covers ncclDevKernel_* and ncclKernel_*; the others catch collective kernels of
  // other libraries (e.g. "AllReduce" in RCCL / custom all-reduce kernels).
  for (std::string_view n : {"nccl", "allreduce", "allgather", "reducescatter", "alltoall"}) {
    if (icontains(name, n)) return true;
  }
  return false;
}

}  // namespace

EventClass classify(std::string_view cat, std::string_view name) {
  if (iequals(cat, "kernel")) {
    return is_collective_kernel(name) ? EventClass::kCommunication : EventClass::kCompute;
  }
  if (iequals(cat, "gpu_memcpy") || iequals(cat, "gpu_memset") || iequals(cat, "memcpy") ||
      iequals(cat, "memset")) {
    return EventClass::kCopy;
  }
  if (iequals(cat, "gil_wait")) return EventClass::kGilWait;
  if (iequals(cat, "user_annotation") || iequals(cat, "gpu_user_annotation")) {
    return EventClass::kAnnotation;
  }
  for (std::string_view h : {"cuda_runtime", "cuda_driver", "cpu_op", "python_function", "operator",
                             "runtime", "cpu_instant_event", "python"}) {
    if (iequals(cat, h)) return EventClass::kHost;
  }
  return EventClass::kOther;
}

LaneRole infer_lane_role(const ClassTally& tally) {
  const auto dur = [&](EventClass c) { return tally.dur_ns[static_cast<int>(c)]; };
  const auto cnt = [&](EventClass c) { return tally.count[static_cast<int>(c)]; };
  const bool gpu =
      cnt(EventClass::kCompute) + cnt(EventClass::kCommunication) + cnt(EventClass::kCopy) > 0;
  if (gpu) {
    // Priority order for ties: the first of compute, comm, copy with the largest duration wins.
    LaneRole best = LaneRole::kCompute;
    TimeNs best_dur = -1;
    std::int64_t best_cnt = -1;
    const std::pair<EventClass, LaneRole> order[] = {{EventClass::kCompute, LaneRole::kCompute},
                                                     {EventClass::kCommunication, LaneRole::kComm},
                                                     {EventClass::kCopy, LaneRole::kCopy}};
    for (const auto& [c, r] : order) {
      if (cnt(c) == 0) continue;
      if (dur(c) > best_dur || (dur(c) == best_dur && cnt(c) > best_cnt)) {
        best = r;
        best_dur = dur(c);
        best_cnt = cnt(c);
      }
    }
    return best;
  }
  if (cnt(EventClass::kHost) + cnt(EventClass::kGilWait) > 0) return LaneRole::kHost;
  return LaneRole::kOther;
}

}  // namespace csim::prof
