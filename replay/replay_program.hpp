// Stage 3 of the replay importer (docs/replay.md, "Stages" and "Edges"): sorted traces, one per
// rank, become one Program. Every host thread issues its measured host time between CUDA runtime
// calls as HostWork (Python when outside any CPU op of the training loop's thread, ATen dispatch
// otherwise); every kernel, memcpy, memset and NCCL kernel becomes an op on its stream at its
// measured duration (Op::fixed_ns); the edges the trace records (launch -> GPU op by correlation,
// stream order, CPU-op nesting) are read, the ones it does not (stream waits, synchronisations,
// thread hand-overs) are inferred by the rules of docs/replay.md, each counted in ImportStats.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/program/program.hpp"
#include "replay/import_stats.hpp"
#include "replay/trace_sorter.hpp"

namespace csim::replay {

// What a GPU op is, for the GPU what-if (docs/replay.md, "Another GPU").
enum class KernelClass : std::uint8_t {
  kGemm,         // GEMM / convolution / attention: scaled by the compute ratio
  kMemoryBound,  // elementwise, reductions, norms, on-device copies: by the bandwidth ratio
  kLaunchBound,  // shorter than kLaunchBoundNs: unchanged
  kCollective,   // NCCL/RCCL: kept at its measured duration
  kHostCopy,     // H2D / D2H memcpy: PCIe, unchanged by the GPU
};
const char* to_string(KernelClass c);

struct GpuOpInfo {
  core::OpId op = core::kNoOp;
  TimeNs measured_ns = 0;  // the record's duration
  KernelClass cls = KernelClass::kMemoryBound;
  bool tensor_core = false;      // GEMM-like with a tensor-core name (half/bf16/tf32 peaks apply)
  bool tf32 = false;             // tensor-core name of a TF32 kernel (s1688, tf32)
  core::GemmShape shape;         // GEMM: from its CPU op's Input Dims (empty when none)
  int group_size = -1;           // collective: ranks in its group (-1 when unknown)
  std::vector<int> group_ranks;  // collective: the group's global ranks (empty when unknown)
  std::string group_key;         // collective: its process group ("pg 0", "ranks 0 2", "size 8")
  bool size_inferred = false;    // collective: sized from Input Dims (collective_info.hpp)
  bool grad_hook = false;        // collective: launched by a gradient hook (AccumulateGrad, FSDP's
                                 // post-backward): the data-parallel group's reduction
};

struct StepRecord {
  std::string name;  // "ProfilerStep#551" ("window" without annotations)
  TimeNs measured_ns = 0;
  core::OpId begin = core::kNoOp, end = core::kNoOp;  // the markers replayed at its bounds
};

struct StreamRecord {
  int stream = 0;               // Program stream id
  TimeNs measured_busy_ns = 0;  // sum of its GPU records' durations in the window
};

struct ImportedRank {
  TraceMeta meta;
  int gpu = 0;
  std::vector<StepRecord> steps;
  std::vector<StreamRecord> streams;
  ImportStats stats;
  TimeNs window_start_ns = 0;    // the trace's time at the replay's time 0
  TimeNs launch_latency_ns = 0;  // median launch call start -> start of a kernel on an idle stream
  // [memory] events (profile_memory=True) of the rank's GPU in the window: the largest "Total
  // Allocated" (-1: none), and the bytes allocated before the window (its first event's Total
  // Allocated minus its Bytes), replayed as one allocation at the window's start.
  Bytes measured_peak_bytes = -1;
  Bytes resident_bytes = 0;
};

struct ReplayProgram {
  core::Program program;
  std::vector<ImportedRank> ranks;
  std::vector<GpuOpInfo> gpu_ops;
  ImportStats stats;       // all ranks
  std::string source_gpu;  // the traces' GPU as the catalog names it ("" when not recognised)
};

// Builds the Program of one trace per rank (rank r on GPU r). Throws InputError naming the file
// when a trace holds nothing to replay (no GPU record and no runtime call in its window).
ReplayProgram build_replay_program(std::vector<SortedTrace> traces, bool hold_unexplained = true);

// The longest a GPU record can be and still count as launch-bound (docs/replay.md, "Another GPU").
inline constexpr TimeNs kLaunchBoundNs = 5000;

// An NCCL / RCCL kernel, by name.
bool is_collective_kernel(const std::string& name);

// The class of a GPU record by its category and name (docs/replay.md, "Another GPU").
KernelClass classify_kernel(Cat cat, const std::string& name, TimeNs dur_ns, bool* tensor_core,
                            bool* tf32);

}  // namespace csim::replay
