// CUPTI activity records as plain structs, and how they join a trace (docs/real-execution.md,
// "CUPTI and NVML"). No CUDA dependency: the CUPTI tracer (cupti_tracer.hpp, CUDA builds only)
// fills these records; everything here is plain C++ so it is unit-tested on any machine.
//
// What a traced CUDA run adds to the trace built from its ops' event-bracketed intervals:
//   - one event per GPU record (kernel, memcpy, memset) on a lane "CUPTI stream S" of its GPU's
//     process (the trace shows it as "GPU g / CUPTI stream S"), carrying the Program op whose
//     launches produced it (op_id, and the op's name as arg "op");
//   - the launch calls (runtime and driver API records that launched one of those) on lanes
//     "CUPTI host thread N", with an ac2g flow from each launch to its GPU work;
//   - synchronisation records (cuda_sync) and NVTX ranges (nvtx) when CUPTI delivered any;
//   - per op, the summed durations of its kernels and of its copies, as args on the op's own
//     event (cupti_kernel_ns, cupti_copy_ns).
// The CUPTI lanes have role "other": they resolve the op lanes at kernel grain, and summaries and
// tracediff keep judging the op lanes, where a simulated and a real run line up op by op.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/program/program.hpp"
#include "core/units.hpp"
#include "profiler/trace.hpp"

namespace csim::cupti {

enum class RecordKind : std::uint8_t {
  kKernel,   // CONCURRENT_KERNEL
  kMemcpy,   // MEMCPY, MEMCPY2 (peer)
  kMemset,   // MEMSET
  kSync,     // SYNCHRONIZATION: a host thread waiting (event / stream / context synchronise)
  kRuntime,  // RUNTIME API call (cudaLaunchKernel, cudaMemcpyAsync, ...)
  kDriver,   // DRIVER API call (cuLaunchKernelEx: cuBLAS and NCCL launch through it)
  kMarker,   // MARKER: an NVTX range or instant
};
const char* to_string(RecordKind k);
// Kernels, memcpys and memsets: work that ran on a GPU stream.
inline bool is_gpu_record(RecordKind k) {
  return k == RecordKind::kKernel || k == RecordKind::kMemcpy || k == RecordKind::kMemset;
}
inline bool is_api_record(RecordKind k) {
  return k == RecordKind::kRuntime || k == RecordKind::kDriver;
}

struct Record {
  RecordKind kind = RecordKind::kKernel;
  std::string name;     // kernel, API function, "Memcpy HtoD (Pinned -> Device)", NVTX range
  TimeNs start_ns = 0;  // host steady clock, ns since the run's clock zero
  TimeNs end_ns = 0;
  int device = -1;           // CUDA device ordinal as CUPTI reports it (-1: API and marker records)
  int gpu = -1;              // global GPU index of `device` (set by the CUDA runtime); -1: unknown
  std::int64_t stream = -1;  // CUPTI stream id (-1: none)
  std::int64_t correlation = -1;  // an API call and the GPU work it launched share it (-1: none)
  std::int64_t op_id = -1;        // Program op pushed while it was issued (-1: none)
  std::int64_t thread = -1;       // OS thread id (API and marker records; -1: unknown)
  Bytes bytes = 0;                // memcpy, memset
  std::string copy_kind;          // memcpy: "HtoD", "DtoH", "DtoD", "PtoP", ...
};

// Gives every record its op id: API records carry the correlation id of their call, and
// EXTERNAL_CORRELATION records (`external_of_correlation`: correlation -> external id, the op id
// pushed on the issuing thread) map it to the op; GPU records and synchronisation records share
// the correlation id of the call that issued them. Records already carrying an op id keep it.
void resolve_op_ids(std::vector<Record>& records,
                    const std::map<std::int64_t, std::int64_t>& external_of_correlation);

// Measured GPU time of one op: the summed durations of its kernels, and of its memcpys and
// memsets. Overlapping kernels of one op (several streams) count each in full.
struct OpGpuTime {
  core::OpId op = -1;
  TimeNs kernel_ns = 0;
  TimeNs copy_ns = 0;
  int kernels = 0;
  int copies = 0;
};
// Ops in increasing id; GPU records without an op are left out.
std::vector<OpGpuTime> gpu_time_by_op(const std::vector<Record>& records);

// What append_to_trace added and what it left out.
struct AppendStats {
  std::int64_t records = 0;                 // given
  std::int64_t gpu_records = 0;             // kernels, memcpys, memsets
  std::int64_t gpu_records_without_op = 0;  // issued while no op was pushed
  std::int64_t events = 0;                  // added to trace.events
  std::int64_t flows = 0;                   // ac2g flows added
  std::int64_t skipped = 0;            // records with no GPU to place them on, unmatched launches
  std::int64_t ops_with_gpu_time = 0;  // op events given cupti_kernel_ns / cupti_copy_ns
};

// Trace ids of the CUPTI lanes (docs/trace-format.md, "Lanes"): far above the op lanes'
// host_tid (1 + thread) and stream_tid (1000 + stream) of backends/common/trace_builder.hpp.
inline constexpr std::int32_t kStreamTidBase = 1'000'000;  // + CUPTI stream id
inline constexpr std::int32_t kHostTidBase = 2'000'000;    // + index of the OS thread
inline constexpr std::int32_t kNvtxTidBase = 3'000'000;    // + index of the OS thread

// Appends `records` (op ids resolved) to a trace built from `program` (build_trace): lanes,
// events, ac2g flows, the per-op GPU time args, and metadata "cupti" (the stats). Correlation and
// flow ids are CUPTI's shifted past every id already in the trace, so they stay unique; CUPTI's
// own is kept as arg "cupti_correlation". Records whose GPU is unknown (no gpu, no op) are
// skipped. Deterministic: the same records give the same trace.
AppendStats append_to_trace(const std::vector<Record>& records, const core::Program& program,
                            prof::Trace* trace);

}  // namespace csim::cupti
