// Trace: the one schema both executors write and every reader produces (docs/trace-format.md).
// Written as Chrome Trace Event JSON with Kineto conventions: one process (pid) per GPU, one thread
// (tid) per stream and per host thread; categories kernel, gpu_memcpy, cuda_runtime, cpu_op,
// user_annotation; args device, stream, correlation; distributedInfo {rank, world_size}.
// Times are int64 ns inside; the writer converts to µs relative to base_ns with ns fractions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/units.hpp"

namespace csim::prof {

// What an event's time counts as, for summaries and diffs. Derived from cat/name when a trace
// does not say it (PyTorch-profiler traces): see classify() in trace_classify.hpp.
enum class EventClass : std::uint8_t {
  kCompute,        // GPU kernel that is not communication
  kCommunication,  // NCCL / collective kernels
  kCopy,           // gpu_memcpy, gpu_memset
  kHost,           // CPU-side op, Python, runtime calls
  kGilWait,        // host thread waiting for the GIL
  kAnnotation,     // user_annotation spans (steps, phases)
  kOther
};
inline constexpr int kEventClassCount = 7;  // number of EventClass values (array sizes)
const char* to_string(EventClass c);
bool parse_event_class(const std::string& s, EventClass* out);
// compute, communication, copy: time a GPU lane spends executing work.
inline bool is_gpu_work(EventClass c) {
  return c == EventClass::kCompute || c == EventClass::kCommunication || c == EventClass::kCopy;
}

using ArgValue = std::variant<std::int64_t, double, std::string>;
struct Arg {
  std::string key;
  ArgValue value;
};

struct TraceEvent {                  // a complete ("X") event
  std::int32_t pid = 0;              // GPU (trace process)
  std::int32_t tid = 0;              // stream or host thread
  TimeNs ts_ns = 0;                  // absolute start
  TimeNs dur_ns = 0;
  std::string name;
  std::string cat;                   // Kineto category
  EventClass cls = EventClass::kOther;
  std::int64_t op_id = -1;           // Program op id (-1: none)
  std::int64_t correlation = -1;     // launch <-> kernel correlation id (-1: none)
  std::vector<Arg> args;             // further args, written in this order
};

// The string value of the event's arg `key`; nullptr when it has none or it is not a string.
inline const std::string* string_arg(const TraceEvent& e, std::string_view key) {
  for (const Arg& a : e.args)
    if (a.key == key) return std::get_if<std::string>(&a.value);
  return nullptr;
}

// Counter of the caching-allocator model (docs/trace-format.md, "Events"; docs/memory.md): series
// reserved, allocated_blocks, cached_free, largest_free_block (bytes) and segments (a count).
inline constexpr const char* kReservedMemoryCounter = "memory reserved";

struct CounterSample {               // a "C" event: one or more series at one time
  std::int32_t pid = 0;
  std::string name;                  // "memory (bytes)"
  TimeNs ts_ns = 0;
  std::vector<std::pair<std::string, double>> values;  // series name -> value
};

struct FlowEvent {                   // "s"/"f" pair
  std::int64_t id = 0;
  std::string name;                  // "ac2g", "dependency", "send->recv"
  std::string cat;
  std::int32_t from_pid = 0, from_tid = 0;
  TimeNs from_ts_ns = 0;
  std::int32_t to_pid = 0, to_tid = 0;
  TimeNs to_ts_ns = 0;
};

enum class LaneRole : std::uint8_t { kCompute, kComm, kCopy, kHost, kOther };
const char* to_string(LaneRole r);

// The name of a GPU's trace process: "node 1 / GPU 3" (local index), or "GPU 11" when the GPUs
// per node are unknown (0).
std::string gpu_process_name(int gpu, int gpus_per_node);
bool parse_lane_role(const std::string& s, LaneRole* out);
// compute, comm, copy: a CUDA stream (as opposed to a host thread).
inline bool is_gpu_lane(LaneRole r) {
  return r == LaneRole::kCompute || r == LaneRole::kComm || r == LaneRole::kCopy;
}

struct ThreadInfo {
  std::int32_t pid = 0, tid = 0;
  std::string name;                  // "stream 7 compute", "main (python)"
  LaneRole role = LaneRole::kOther;
  int sort_index = 0;
};

struct ProcessInfo {
  std::int32_t pid = 0;
  std::string name;                  // "node 0 / GPU 1"
  int rank = -1, node = -1, gpu = -1;  // gpu = global index
  Bytes capacity_bytes = 0;          // usable memory (0: unknown)
  int sort_index = 0;
};

struct Trace {
  TimeNs base_ns = 0;                // written timestamps are relative to this
  int rank = 0;                      // distributedInfo.rank (for per-rank files), else 0
  int world_size = 1;                // distributedInfo.world_size
  nlohmann::json metadata = nlohmann::json::object();  // scenario, backend, summary inputs, versions
  std::vector<ProcessInfo> processes;
  std::vector<ThreadInfo> threads;
  std::vector<TraceEvent> events;
  std::vector<CounterSample> counters;
  std::vector<FlowEvent> flows;

  const ProcessInfo* process(std::int32_t pid) const;
  const ThreadInfo* thread(std::int32_t pid, std::int32_t tid) const;
};

}  // namespace csim::prof
