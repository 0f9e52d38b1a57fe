// The edges a Kineto trace does not record, inferred from its times (docs/replay.md, "Edges"):
//  * sync: a runtime call that outlasted a GPU op it could wait for (its own memcpy, or any op
//    already launched for a *Synchronize call) waits for that op, then spends the rest of the call;
//  * stream: a GPU op that started later than its stream and its launch allow waits for the op of
//    another stream of its GPU that ended last before it started, and for the last op of each
//    other stream that ended within kStreamEdgeNearNs of that one (cudaStreamWaitEvent); when none
//    did, for the kernel of another stream that was running when it started, if that kernel ended
//    sooner after its start than it was held back (the GPU was full: an occupancy wait);
//  * thread: a host thread idle for kThreadEdgeNs or more resumes after the op another thread of
//    its rank finished last before it resumed (the autograd engine handing back to the loop).
//  * hold: a GPU op held back with none of the above to explain it (an NCCL kernel waiting for
//    peers the trace does not hold) starts no earlier than its measured delay after its launch
//    call's end; one without a launch in the window no earlier than its measured start from the
//    window's start. A helper thread issues a marker then, which the op waits for.
//  * read: cuda_sync records (Kineto's enable_cuda_sync_events) name a cudaStreamWaitEvent's or
//    cudaEventSynchronize's event (the cudaEventRecord call and its stream) and a
//    cudaStreamSynchronize's stream; cudaDeviceSynchronize waits for every stream by definition.
//  * collective waits (collective_waits.cpp): a cudaStreamWaitEvent outside the collectives' own
//    CPU ops (c10d's work.wait(), DDP's finalize) makes the next GPU op its thread launches wait
//    for a collective; optimizer waits, where the trace records no cudaStreamWaitEvent at all.
// Every candidate ended before the op that waits for it began, in the measured run, so the edges
// never form a cycle: the measured run is a schedule that meets them all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/program/program.hpp"

namespace csim::replay {

struct ReplayProgram;

struct GpuOpRef {
  core::OpId op = core::kNoOp;
  int gpu = 0, stream = 0, thread = 0;
  TimeNs launch_ns = 0, start_ns = 0, end_ns = 0;  // measured
  bool kernel = false;                             // a compute kernel (not NCCL, copy, memset)
  bool collective = false;                         // an NCCL / RCCL kernel
  core::OpId launch_op = core::kNoOp;              // the launch call's HostWork (none: unlaunched)
  TimeNs launch_end_ns = 0;                        // measured end of that call
  core::OpId call_op = core::kNoOp;  // the launch call's own HostWork (none: unlaunched)
  TimeNs call_end_ns = 0;            // measured end of the launch call
};
struct HostOpRef {
  core::OpId op = core::kNoOp;
  int gpu = 0, thread = 0;
  TimeNs start_ns = 0, end_ns = 0;  // measured
  TimeNs idle_ns = 0;               // gaps: the part outside any CPU op
  bool gap = false;                 // host time between calls (false: the call itself)
  bool loop = false;                // on the training loop's thread
};
enum class SyncKind : std::uint8_t {
  kOther,
  kDeviceSync,   // cudaDeviceSynchronize / Context Sync: every stream
  kStreamSync,   // cudaStreamSynchronize
  kEventSync,    // cudaEventSynchronize
  kStreamWait,   // cudaStreamWaitEvent
  kEventRecord,  // cudaEventRecord
};
struct SyncCall {               // every runtime call
  core::OpId op = core::kNoOp;  // the call's HostWork
  int gpu = 0, thread = 0;
  TimeNs start_ns = 0, end_ns = 0;
  std::size_t own_begin = 0, own_end = 0;  // its own GPU ops in EdgeInputs::gpu_ops
  bool synchronize = false;                // a *Synchronize call (waits for any launched op)
  SyncKind kind = SyncKind::kOther;
  // From a cuda_sync record (read = true): the stream synchronised or waiting, and the stream
  // and start of the cudaEventRecord call whose event it waited for (-1: not named).
  bool read = false;
  int sync_stream = -1, record_stream = -1;
  TimeNs record_ns = -1;
  bool wait = false;                   // a cudaStreamWaitEvent outside the collectives' own CPU ops
  std::size_t next_gpu_op = SIZE_MAX;  // the first GPU op its thread launched after it
};
struct OptimizerStep {  // an Optimizer.step#... annotation
  int gpu = 0, thread = 0;
  TimeNs start_ns = 0, end_ns = 0;
};
// A GPU op that may not start before a measured time: a marker issued then by a helper thread,
// which the op waits for (kStreamWaits). With `after`, the time is relative: the helper waits
// for that host op (the op's launch call), then for at_ns; without, at_ns is on the trace's clock.
struct Hold {
  core::OpId op = core::kNoOp;
  int gpu = 0;
  TimeNs at_ns = 0;
  core::OpId after = core::kNoOp;
  TimeNs from_ns = 0;  // measured time of `after`'s end (helper threads are shared by time)
};
struct EdgeInputs {
  std::vector<Hold> holds;
  std::vector<GpuOpRef> gpu_ops;
  std::vector<HostOpRef> host_ops;
  std::vector<SyncCall> syncs;
  std::vector<OptimizerStep> optimizer_steps;
  std::vector<char> records_waits;  // per GPU: its trace records cudaStreamWaitEvent or cuda_sync
};

// The GPU ops of each stream in issue (launch) order, to find the op an event or a sync stands for.
class StreamIndex {
 public:
  explicit StreamIndex(const std::vector<GpuOpRef>& ops);
  // The last op of `stream` launched before t / the first launched at or after t (-1: none).
  std::ptrdiff_t last_before(int stream, TimeNs t) const;
  std::ptrdiff_t first_from(int stream, TimeNs t) const;
  const std::map<int, std::vector<std::size_t>>& streams() const { return by_stream_; }

 private:
  const std::vector<GpuOpRef>& ops_;
  std::map<int, std::vector<std::size_t>> by_stream_;
};

inline constexpr TimeNs kStreamEdgeSlackNs = 5000;  // held back by more than this: look for why
inline constexpr TimeNs kStreamEdgeNearNs = 20000;  // other streams' ops ending this near the
                                                    // latest one: waited for too
inline constexpr TimeNs kStreamEdgeAfterNs = 3000;  // the op it waits for may end this much after
                                                    // it starts (µs rounding of both)
inline constexpr TimeNs kThreadEdgeNs = 20000;      // idle this long: look for who woke it
inline constexpr TimeNs kLoopEdgeNs = 1000000;      // the loop thread: idle this long (its Python
                                                    // counts as idle: only a long wait is one)
inline constexpr TimeNs kWakeNs = 50000;            // woken: resumed within this of the op's end
inline constexpr TimeNs kSyncSlackNs = 2000;        // a sync returns this long after its op ends

// cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, hip*, and blocking memcpy.
bool is_sync_call(const std::string& name);

// The collective waits and optimizer waits (collective_waits.cpp).
void collective_wait_edges(core::Program& p, const EdgeInputs& in, ReplayProgram& out);

// hold_unexplained false: ops held back for no reason the trace shows start when they can
// (replay.hold_unexplained=false, the optimistic bound of a what-if).
void infer_edges(core::Program& p, EdgeInputs& in, ReplayProgram& out, bool hold_unexplained);

}  // namespace csim::replay
