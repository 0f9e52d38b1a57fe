// One GPU's share of a Program collective as NCCL calls (internal to backends/cuda). The payload
// follows nccl-tests: `bytes` is the buffer size per GPU ("size"), held as float32, so
// count = bytes / 4; reduce-scatter receives and all-gather sends count / ranks elements, and the
// kinds NCCL has no single call for in every version (all-to-all, scatter, gather) are grouped
// ncclSend / ncclRecv of count / ranks elements per peer, as nccl-tests' alltoall, scatter and
// gather do. Payloads above kMaxBufferBytes repeat in chunks of it (the same on every rank, since
// every member's op has the same bytes).
#pragma once

#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/program/program.hpp"
#include "core/units.hpp"

namespace csim::cuda {

struct CollectiveCall {
  core::CollectiveKind kind = core::CollectiveKind::kAllReduce;
  int rank = 0;    // this GPU's rank in the group
  int nranks = 1;  // group size
  int root = 0;    // root rank (broadcast, reduce, scatter, gather)
  Bytes bytes = 0;
  void* send = nullptr;  // device buffers of at least min(bytes, kMaxBufferBytes) each
  void* recv = nullptr;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  // An all-to-all's traffic matrix (core::CommGroup::a2a_shares; null or empty: uniform): this
  // rank sends bytes x w[rank p + peer] to each peer and receives bytes x w[peer p + rank].
  const std::vector<double>* a2a_shares = nullptr;
};

// Issues the calls for `c` on c.stream (no waiting: NCCL enqueues). send/recv ops (kSendRecv) run
// on a 2-GPU group: rank 0 sends, rank 1 receives. Returns ncclSuccess, or the first failing status
// with *failed_call naming the NCCL function.
ncclResult_t issue_collective(const CollectiveCall& c, const char** failed_call);

}  // namespace csim::cuda
