// Classification of trace events into EventClass by Kineto category and name, and inference of a
// lane's role from the classes of its events (docs/trace-format.md, "Classes and roles").
// Used when reading traces that do not carry our "class" / "role" args (PyTorch-profiler traces).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/units.hpp"
#include "profiler/trace.hpp"

namespace csim::prof {

// kernel → kCommunication when the name looks like a collective (contains "nccl",
// "allreduce", "allgather", "reducescatter" or "alltoall", case-insensitive), else kCompute;
// gpu_memcpy / gpu_memset → kCopy; cuda_runtime, cuda_driver, cpu_op, python_function, … →
// kHost; gil_wait → kGilWait; user_annotation / gpu_user_annotation → kAnnotation; else kOther.
// Categories compare case-insensitively (older Kineto writes "Kernel", "Memcpy", "Runtime").
// Takes string_views so that std::string, literals and views into a parser's buffer all bind.
EventClass classify(std::string_view cat, std::string_view name);

// Per-lane tally of what its events are, to infer a role.
struct ClassTally {
  std::array<std::int64_t, kEventClassCount> count{};  // events per EventClass
  std::array<TimeNs, kEventClassCount> dur_ns{};       // summed duration per EventClass

  void add(EventClass c, TimeNs dur) {
    count[static_cast<int>(c)] += 1;
    dur_ns[static_cast<int>(c)] += dur;
  }
};

// A lane with GPU work (compute / communication / copy) takes the role of the GPU class with the
// most summed duration (ties: compute > comm > copy); otherwise host or GIL-wait events make it
// kHost; otherwise (annotations only, nothing) kOther.
LaneRole infer_lane_role(const ClassTally& tally);

}  // namespace csim::prof
