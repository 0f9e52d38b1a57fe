// The importer's stats table (docs/replay.md, "Import stats"), after Perfetto's
// src/trace_processor/storage/stats.h: every record the importer skips, repairs or infers
// something for is counted against one named counter with a severity and a one-line description;
// the summary prints the non-zero ones. A stage never throws for a bad record: it counts it and
// goes on; only a file that is not a trace at all, or a trace with nothing usable, is an error.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <string>

namespace csim::replay {

enum class Severity : std::uint8_t {
  kInfo,      // read as expected, counted for the record (flows matched, steps found)
  kInferred,  // something the trace does not state, inferred by a documented rule
  kDataLoss,  // a record skipped: what it stood for is missing from the replay
  kError,     // a damaged record (bad type, negative duration): skipped
};
const char* to_string(Severity s);

// X-macro: name, severity, description. Order is the printing order.
#define CSIM_REPLAY_STATS(X)                                                                       \
  X(events_read, kInfo, "trace events read")                                                       \
  X(cpu_ops, kInfo, "CPU ops (cpu_op, user_annotation, python_function) read")                     \
  X(runtime_calls, kInfo, "CUDA/HIP runtime and driver calls read")                                \
  X(kernels, kInfo, "GPU kernels read")                                                            \
  X(memcpys, kInfo, "GPU memcpy records read")                                                     \
  X(memsets, kInfo, "GPU memset records read")                                                     \
  X(collectives, kInfo, "NCCL/RCCL kernels read as collectives")                                   \
  X(collectives_sized, kInfo, "collectives whose size came from record_param_comms")               \
  X(collectives_group_read, kInfo,                                                                 \
    "collectives whose group came from Process Group Ranks / pg_config")                           \
  X(memory_events, kInfo, "[memory] instant events read")                                          \
  X(memory_replayed, kInfo, "GPU [memory] events replayed as allocations and frees")               \
  X(cuda_sync_events, kInfo, "cuda_sync records (stream waits, synchronisations) read")            \
  X(event_waits, kInfo, "cross-stream waits read from cuda_sync (cudaStreamWaitEvent's event)")    \
  X(sync_reads, kInfo,                                                                             \
    "host synchronisations whose target the trace names (device sync, cuda_sync)")                 \
  X(gemm_shapes, kInfo, "GEMM kernels whose shape came from their CPU op's Input Dims")            \
  X(profiler_steps, kInfo, "ProfilerStep#N annotations (replay windows)")                          \
  X(launches_matched, kInfo, "GPU records matched to their launch by correlation id")              \
  X(graph_launch_kernels, kInfo, "kernels launched by one cudaGraphLaunch (expanded)")             \
  X(metadata_events, kInfo, "metadata (ph M) and flow (ph s/f) records, not needed")               \
  X(no_launch, kInferred,                                                                          \
    "GPU records without a launch: issued after the one before on the stream")                     \
  X(carried_over, kInferred, "GPU records launched before the window, running in it: kept")        \
  X(sync_waits, kInferred, "synchronising calls replayed as a wait for the GPU op they outlasted") \
  X(stream_edges, kInferred, "cross-stream waits inferred from a kernel held back by another")     \
  X(occupancy_edges, kInferred, "kernels held back while another stream's kernel filled the GPU")  \
  X(unexplained_waits, kInferred,                                                                  \
    "GPU ops held back for no reason the trace shows: kept at their start")                        \
  X(collective_waits, kInferred,                                                                   \
    "GPU ops after a cudaStreamWaitEvent outside the collectives, waiting for one (c10d wait)")    \
  X(optimizer_waits, kInferred,                                                                    \
    "optimizer steps waiting for the step's last collective (no cudaStreamWaitEvent recorded)")    \
  X(sync_last_launch, kInferred,                                                                   \
    "synchronising calls that did not block: wait for the thread's last launched GPU op")          \
  X(sync_last_record, kInferred,                                                                   \
    "cudaEventSynchronize calls that did not block: wait for the latest cudaEventRecord's op")     \
  X(launch_order_waits, kInferred,                                                                 \
    "GPU ops of a stream two threads launch on: issued after the earlier launch call ended")       \
  X(thread_edges, kInferred,                                                                       \
    "host-thread waits inferred from an idle gap ended by another thread")                         \
  X(collectives_unsized, kInferred,                                                                \
    "collectives without a size: not re-costable, kept at their measured duration")                \
  X(collectives_size_inferred, kInferred,                                                          \
    "collectives sized from their nccl:/c10d op's Input Dims and Input type (re-costable)")        \
  X(collectives_group_world, kInferred,                                                            \
    "collectives without a Group size: the default process group (the job's world) assumed")       \
  X(collectives_no_group, kInferred,                                                               \
    "sized collectives without any group size: not re-costable, kept at their measured duration")  \
  X(no_steps, kInferred, "traces without ProfilerStep#N: replayed as one window")                  \
  X(gpu_guessed, kInferred, "traces whose GPU was not named: the default GPU assumed")             \
  X(outside_window, kDataLoss, "records outside the ProfilerStep windows: not replayed")           \
  X(unknown_phase, kDataLoss, "records with a phase the importer does not read (B/E, i, C ...)")   \
  X(unknown_category, kDataLoss, "complete events of a category the importer does not read")       \
  X(memory_other_device, kDataLoss, "[memory] events of the CPU or another device: not replayed")  \
  X(overlapping_kernels, kDataLoss, "kernels on one stream overlapping the previous one: clipped") \
  X(not_an_object, kError, "traceEvents entries that are not JSON objects")                        \
  X(missing_field, kError, "events without a usable name, ph, pid, tid or ts")                     \
  X(bad_timestamp, kError, "ts or dur not a finite number or out of range")                        \
  X(negative_duration, kError, "events with a negative duration")                                  \
  X(bad_arg, kError, "args of the wrong type (correlation, stream, bytes ...): arg ignored")

enum class Stat : std::uint8_t {
#define CSIM_REPLAY_STAT_ENUM(name, sev, desc) name,
  CSIM_REPLAY_STATS(CSIM_REPLAY_STAT_ENUM)
#undef CSIM_REPLAY_STAT_ENUM
      kCount
};
inline constexpr int kNumStats = static_cast<int>(Stat::kCount);

struct StatInfo {
  const char* name;
  Severity severity;
  const char* description;
};
const StatInfo& info(Stat s);

class ImportStats {
 public:
  void add(Stat s, std::int64_t n = 1) { v_[static_cast<std::size_t>(s)] += n; }
  std::int64_t get(Stat s) const { return v_[static_cast<std::size_t>(s)]; }
  void merge(const ImportStats& o) {
    for (std::size_t i = 0; i < v_.size(); ++i) v_[i] += o.v_[i];
  }
  // Records skipped for damage (severity kError), the count the caller may fail on.
  std::int64_t errors() const;
  // The non-zero counters, one line each: "  name  value  severity  description".
  void print(std::ostream& out) const;

 private:
  std::array<std::int64_t, kNumStats> v_{};
};

}  // namespace csim::replay
