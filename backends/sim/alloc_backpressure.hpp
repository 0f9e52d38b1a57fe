// Allocation backpressure (docs/memory.md, "Allocation backpressure"): the host view of PyTorch's
// CUDA caching allocator, which makes a host that runs ahead of its GPU wait when the memory it
// asks for is held by frees the GPU has not reached yet.
//
// PyTorch allocates and frees on the host (c10/cuda/CUDACachingAllocator.cpp). A block freed by
// the host returns at once to the pool of the stream it was allocated on (stream order makes
// the reuse safe), unless it was used on another stream (recordStream): then free() records an
// event on each such stream (insert_events) and the block is reusable only once the event has
// completed (process_events). When a malloc finds no cached block and cudaMalloc does not fit, the
// retry (release_cached_blocks) first synchronizes on every outstanding event
// (synchronize_and_free_events: cudaEventSynchronize each), so the host blocks until the GPU has
// passed every such free; then it releases the cached segments and tries cudaMalloc again.
//
// In a Program: an alloc op is issued by its thread; a free op is matched (as the caching-allocator
// model does: the oldest live allocation of its GPU with the same category and bytes, preferring
// the same name) and releases the bytes when the host issues it, unless it is marked record_stream
// (core::Op; DeepSpeed's free_param, FSDP1's _free_unsharded_flat_param: a buffer gathered on a
// side stream and freed after its compute; FSDP1's _free_low_precision_sharded_param: a shard cast
// on the pre-unshard stream, freed on the all-gather's) and runs on another stream than the
// allocation's: then the bytes stay held until the free op has run on its stream. Per GPU, held =
// live (allocated, not freed by the host) + pending (freed cross-stream, not yet run). Before the
// host issues an alloc of b bytes with held + b > usable memory and some pending free, the thread
// waits for every free pending at that moment, then issues the alloc (if it still does not fit, the
// memory timeline reports the OOM as before).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::sim {

class AllocBackpressure {
 public:
  // capacity_by_gpu: usable memory per global GPU index (0: not checked).
  void reset(const core::Program& p, std::vector<Bytes> capacity_by_gpu);

  // Before thread `thread` issues alloc `op`: a pending free to wait for, or kNoOp to issue now.
  // The first call that finds the alloc over capacity snapshots the GPU's pending frees (the
  // retry's synchronize_and_free_events); later calls return the first of them not done yet.
  core::OpId wait_before(int thread, const core::Op& op, const std::vector<char>& done);

  void on_issue(const core::Op& op);     // an alloc or free op issued by the host
  void on_complete(const core::Op& op);  // an op ran on its stream (only frees matter)

  // Host synchronizations (allocator retries) per GPU, for the run's notes.
  const std::vector<int>& syncs_by_gpu() const { return syncs_; }
  Bytes held_bytes(int gpu) const { return held_[static_cast<std::size_t>(gpu)]; }

 private:
  struct Live {
    core::NameId name;
    int stream = -1;
  };
  struct Gpu {
    std::map<std::pair<int, Bytes>, std::vector<Live>> live;  // by (category, bytes), oldest first
    std::vector<core::OpId> pending;                          // cross-stream frees, issue order
  };
  struct Sync {
    core::OpId alloc = core::kNoOp;  // the alloc whose retry synchronizes
    std::vector<core::OpId> waits;   // the frees pending at the retry
    std::size_t next = 0;
    bool synced = false;
  };
  const core::Program* program_ = nullptr;
  std::vector<Bytes> capacity_, held_;
  std::vector<Gpu> gpus_;
  std::vector<Bytes> pending_bytes_;   // by free op: bytes it holds until it runs (0: none)
  std::vector<Sync> syncs_in_flight_;  // by thread
  std::vector<int> syncs_;
};

// Usable memory per global GPU index, as the memory timeline checks it
// (core/program/memory_timeline.cpp: NCCL's buffers counted on the GPUs that run a collective).
std::vector<Bytes> usable_memory_by_gpu(const core::Program& p, const core::ClusterSpec& cluster);

// One note per GPU whose host synchronized ("allocator backpressure: ..."), none otherwise.
void backpressure_notes(const AllocBackpressure& b, std::vector<std::string>* notes);

}  // namespace csim::sim
