// Stage 1 of the replay importer (docs/replay.md, "Stages"): a PyTorch-profiler (Kineto) trace
// file, plain or gzip-compressed, read into flat records. Only what the later stages use is kept
// (times in int64 ns, ids, the few args named below); every record that cannot be read is counted
// in ImportStats and skipped. Throws InputError (naming the file and a hint) only when the file is
// not a Chrome trace at all: unreadable, not JSON, no traceEvents array.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "replay/import_stats.hpp"

namespace csim::replay {

enum class Cat : std::uint8_t {
  kCpuOp,       // cpu_op: host work inside the framework (ATen)
  kPython,      // python_function (with_stack=True): Python frames
  kAnnotation,  // user_annotation (ProfilerStep#N, record_function ranges)
  kRuntime,     // cuda_runtime / cuda_driver (and HIP's): a call that may launch GPU work
  kKernel,      // kernel
  kMemcpy,      // gpu_memcpy
  kMemset,      // gpu_memset
  kMemory,      // [memory] instant (profile_memory=True)
  kSync,        // cuda_sync (enable_cuda_sync_events): a stream wait or synchronisation, with
                // the stream and the cudaEventRecord it waited for
};

struct Record {
  Cat cat = Cat::kCpuOp;
  std::string name;
  std::int64_t pid = 0, tid = 0;      // host: process, thread; GPU: device, stream
  TimeNs ts_ns = 0, dur_ns = 0;       // start and duration
  std::int64_t correlation = -1;      // launch <-> GPU record
  std::int64_t external_id = -1;      // CPU op <-> launch (record_param_comms <-> NCCL kernel)
  std::int64_t device = -1;           // GPU records: args.device
  std::int64_t stream = -1;           // GPU records: args.stream
  std::int64_t bytes = -1;            // memcpy/memset: args.bytes; [memory]: args.Bytes
  std::int64_t total_allocated = -1;  // [memory]: args."Total Allocated"
  std::int64_t device_type = -1;      // [memory]: args."Device Type" (1: CUDA, 0: CPU)
  // cuda_sync: the stream the event was recorded on (args.wait_on_stream) and the correlation
  // of the cudaEventRecord that recorded it (args.wait_on_cuda_event_record_corr_id); -1: none
  std::int64_t wait_on_stream = -1, wait_record_corr = -1;
  // record_param_comms (PyTorch >= 2.1): the collective the NCCL kernel launched by it runs
  std::string collective_name;  // args."Collective name" ("allreduce", "_allgather_base")
  std::string dtype;            // args.dtype ("Float", "BFloat16")
  std::int64_t in_nelems = -1, out_nelems = -1, group_size = -1;
  std::string pg_name;        // args."Process Group Name" ("" when absent)
  std::vector<int> pg_ranks;  // args."Process Group Ranks" (a list, or its text "[0, 1]")
  std::int64_t rank_start = -1, rank_stride = -1;  // args."Global rank start" / "stride"
  std::string input_dims;   // args."Input Dims", minified JSON (GEMM shapes, collective sizes)
  std::string input_types;  // args."Input type", minified JSON (a collective's element type)
  std::int64_t seq = 0;     // position in the file: ties broken by it (deterministic)
};

struct TraceMeta {
  std::string file;      // as named on the command line
  std::string gpu_name;  // deviceProperties[0].name ("" when absent)
  int rank = -1;         // distributedInfo.rank
  int world_size = -1;   // distributedInfo.world_size
};

struct TokenizedTrace {
  TraceMeta meta;
  std::vector<Record> records;
  ImportStats stats;
};

// Reads PATH (gzip detected by zlib). Throws InputError for a file that is not a Chrome trace.
TokenizedTrace tokenize_file(const std::string& path);
// The same on text already in memory (tests, the fuzz target); NAME stands for the file.
TokenizedTrace tokenize_string(const std::string& json, const std::string& name);

}  // namespace csim::replay
