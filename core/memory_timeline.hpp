// Memory per GPU over time, by category, from a Program and its op timings
// (docs/cost-model.md, "Memory"): every Alloc/Free op changes its GPU's allocated bytes at the
// time it ran on its stream. Peak, capacity check against usable memory, and an OOM verdict
// naming the GPU, the op and the shortfall; and the same ops through the caching-allocator model
// (core/caching_allocator.hpp, docs/memory.md): reserved bytes, fragmentation, segments.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/caching_allocator.hpp"
#include "core/executor.hpp"
#include "core/program.hpp"

namespace csim::core {

struct MemorySample {
  TimeNs t_ns = 0;
  Bytes total = 0;                                  // allocated, all categories
  std::array<Bytes, kNumMemCategories> by_category{};
};

struct GpuMemory {
  int gpu = 0;
  Bytes capacity_bytes = 0;                         // usable memory
  Bytes peak_bytes = 0;
  TimeNs peak_at_ns = 0;
  std::array<Bytes, kNumMemCategories> at_peak{};   // by category at the peak
  std::vector<MemorySample> samples;                // one per change, time order
};

struct OomVerdict {
  int gpu = 0;
  OpId op = kNoOp;               // the allocation that did not fit
  std::string op_name;
  Bytes requested_bytes = 0;
  Bytes shortfall_bytes = 0;     // allocated after the op - capacity
  Bytes capacity_bytes = 0;
  TimeNs at_ns = 0;
};

struct MemoryReport {
  std::vector<GpuMemory> gpus;   // the program's active GPUs, in order
  std::optional<OomVerdict> oom; // the first allocation, in time, that exceeds its GPU's capacity
  AllocatorReport allocator;     // the same ops through PyTorch's caching allocator (docs/memory.md)
};

MemoryReport memory_timeline(const Program& program, const std::vector<OpTiming>& timings,
                             const ClusterSpec& cluster);

}  // namespace csim::core
