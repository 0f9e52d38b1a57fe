// The edges a Kineto trace does not record, inferred from its times (docs/replay.md, "Edges"):
//  * sync: a runtime call that outlasted a GPU op it could wait for (its own memcpy, or any op
//    already launched for a *Synchronize call) waits for that op, then spends the rest of the call;
//  * stream: a GPU op that started later than its stream and its launch allow waits for the op of
//    another stream of its GPU that ended last before it started (cudaStreamWaitEvent);
//  * thread: a host thread idle for kThreadEdgeNs or more resumes after the op another thread of
//    its rank finished last before it resumed (the autograd engine handing back to the loop).
// Every candidate ended before the op that waits for it began, in the measured run, so the edges
// never form a cycle: the measured run is a schedule that meets them all.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/program/program.hpp"

namespace csim::replay {

struct ReplayProgram;

struct GpuOpRef {
  core::OpId op = core::kNoOp;
  int gpu = 0, stream = 0, thread = 0;
  TimeNs launch_ns = 0, start_ns = 0, end_ns = 0;  // measured
};
struct HostOpRef {
  core::OpId op = core::kNoOp;
  int gpu = 0, thread = 0;
  TimeNs start_ns = 0, end_ns = 0;  // measured
  TimeNs idle_ns = 0;               // gaps: the part outside any CPU op
  bool gap = false;                 // host time between calls (false: the call itself)
};
struct SyncCall {
  core::OpId op = core::kNoOp;  // the call's HostWork
  int gpu = 0;
  TimeNs start_ns = 0, end_ns = 0;
  std::size_t own_begin = 0, own_end = 0;  // its own GPU ops in EdgeInputs::gpu_ops
  bool synchronize = false;                // a *Synchronize call (waits for any launched op)
};
struct EdgeInputs {
  std::vector<GpuOpRef> gpu_ops;
  std::vector<HostOpRef> host_ops;
  std::vector<SyncCall> syncs;
};

inline constexpr TimeNs kStreamEdgeSlackNs = 5000;  // held back by more than this: look for why
inline constexpr TimeNs kThreadEdgeNs = 20000;      // idle this long: look for who woke it
inline constexpr TimeNs kSyncSlackNs = 2000;        // a sync returns this long after its op ends

// cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, hip*, and blocking memcpy.
bool is_sync_call(const std::string& name);

void infer_edges(core::Program& p, const EdgeInputs& in, ReplayProgram& out);

}  // namespace csim::replay
