// Which CUDA events a Program's dependencies become in the trace, as the PyTorch profiler records
// them with enable_cuda_sync_events=True (docs/trace-format.md, "Stream dependencies"):
//  * a stream waiting for an op on another stream of the same process (kStreamWaits): a
//    cudaEventRecord after the producer's launch, a cudaStreamWaitEvent before the consumer's
//    launch, and a "Stream Wait Event" cuda_sync event on the consumer's stream;
//  * a host thread waiting for a GPU op of its process (kHostWaits): the same record, a
//    cudaEventSynchronize on the waiting thread over the time it was blocked, and an "Event
//    Sync" cuda_sync event on the producer's GPU.
// Dependencies between processes (DDP ranks, pipeline stages) are NCCL's business, not CUDA
// events: they get none (their cross-GPU "dependency" flows stay in the merged trace).
#pragma once

#include <cstdint>
#include <vector>

#include "core/program/executor.hpp"
#include "core/program/program.hpp"
#include "core/progress.hpp"

namespace csim::backend {

struct CudaSyncPlan {
  // Per op: correlation id of the cudaEventRecord issued right after its launch (-1: none) and
  // the CUDA event id it records.
  std::vector<std::int64_t> record_corr;
  std::vector<std::int64_t> record_event;
  // Per op: the producers on other streams it waits for with cudaStreamWaitEvent, in dep order.
  std::vector<std::vector<core::OpId>> stream_waits;
  // Per op: the GPU op its host thread synchronises on before the op (-1: none), and when the
  // blocking cudaEventSynchronize starts (it ends when the thread is ready, OpTiming::ready_ns).
  std::vector<core::OpId> host_wait_on;
  std::vector<TimeNs> host_wait_from;
  // Per op with stream waits: where its stream became free before it (the previous op on the
  // stream ended), the start of the span the stream waits.
  std::vector<TimeNs> stream_free_ns;
  std::int64_t next_corr = 0;  // first correlation id not used by the records
  std::int64_t next_event = 0;
};

// Correlation ids of the records start at first_corr (after the ops' own, op id + 1). `count`,
// when given, counts two passes over the ops: the per-op state filled, then the ops planned
// (docs/limits.md, "Progress": "building the trace").
CudaSyncPlan plan_cuda_sync(const core::Program& p, const std::vector<core::OpTiming>& t,
                            std::int64_t first_corr, core::ProgressCount* count = nullptr);

// Host time of each sync call carved out of an op's launch call: `calls` calls and the launch
// share dispatch_ns, each call taking at most 1 µs (a cudaStreamWaitEvent or cudaEventRecord
// takes 1.6–2.5 µs in ../shared/fixtures/kineto/nccl_data.json.gz; the simulated dispatch
// already includes them).
TimeNs sync_call_ns(TimeNs dispatch_ns, int calls);

}  // namespace csim::backend
