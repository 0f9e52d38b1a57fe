// Memory per GPU over time, by category, from a Program and its op timings
// (docs/cost-model.md, "Memory"): every Alloc/Free op changes its GPU's allocated bytes at the
// time it ran on its stream. Peak, capacity check against usable memory, and an OOM verdict
// naming the GPU, the op and the shortfall; and the same ops through the caching-allocator model
// (core/program/caching_allocator.hpp, docs/memory.md): reserved bytes, fragmentation, segments.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/program/caching_allocator.hpp"
#include "core/program/executor.hpp"
#include "core/program/program.hpp"
#include "core/progress.hpp"

namespace csim::core {

struct MemorySample {
  TimeNs t_ns = 0;
  Bytes total = 0;  // allocated, all categories
  std::array<Bytes, kNumMemCategories> by_category{};
};

struct GpuMemory {
  int gpu = 0;
  Bytes capacity_bytes = 0;  // usable memory
  Bytes peak_bytes = 0;      // as simulated, every step
  TimeNs peak_at_ns = 0;
  // docs/memory.md, "First-step and steady-state peaks": the first step's peak (PyTorch
  // allocates Adam's state lazily at the first step(), so it peaks lower) and the steady state's
  // (from step 2 on: the optimizer state and everything else step 1 left resident). With one
  // step the steady state is projected from step 1; with more it is the peak of steps >= 2.
  Bytes first_step_peak_bytes = 0;
  Bytes steady_peak_bytes = 0;
  bool steady_projected = false;  // true: a one-step run, steady state projected from step 1
  std::array<Bytes, kNumMemCategories> at_peak{};  // by category at the peak
  std::vector<MemorySample> samples;               // one per change, time order
};

struct OomVerdict {
  int gpu = 0;
  OpId op = kNoOp;  // the allocation that did not fit
  std::string op_name;
  Bytes requested_bytes = 0;
  Bytes shortfall_bytes = 0;  // allocated after the op - capacity (the first failing one)
  Bytes capacity_bytes = 0;
  TimeNs at_ns = 0;
  // How far the run would exceed the capacity: the GPU's larger of its simulated and
  // steady-state peaks, minus the capacity (docs/memory.md, "OOM verdict").
  Bytes would_be_peak_bytes = 0;
  Bytes over_capacity_bytes = 0;
  // The verdict comes from the steady-state projection of a one-step run (no allocation of the
  // simulated step failed; step 2 would, with the optimizer state resident).
  bool steady_state = false;
  // The verdict is the caching allocator's (docs/memory.md, "OOM verdict"): the allocated bytes
  // fit, but the segment (or, with expandable segments, the pages) the request needs does not,
  // even after the cache is released. Then shortfall_bytes = reserved + segment - capacity, and
  // would_be_peak_bytes / over_capacity_bytes are about the GPU's peak reserved bytes.
  bool allocator = false;
  bool expandable_segments = false;  // the allocator ran with expandable segments
  Bytes reserved_bytes = 0;          // allocator: reserved when the request failed
  Bytes segment_bytes = 0;           // allocator: the cudaMalloc / pages that did not fit
  Bytes allocated_bytes = 0;         // allocator: allocated blocks (rounded) at that moment
};

struct MemoryReport {
  std::vector<GpuMemory> gpus;    // the program's active GPUs, in order
  std::optional<OomVerdict> oom;  // the first allocation, in time, that exceeds its GPU's capacity
  AllocatorReport allocator;  // the same ops through PyTorch's caching allocator (docs/memory.md)
};

// With `progress`, the phase "analysing memory" (docs/limits.md, "Progress").
MemoryReport memory_timeline(const Program& program, const std::vector<OpTiming>& timings,
                             const ClusterSpec& cluster, Progress* progress = nullptr);

}  // namespace csim::core
