// Memory view model: per GPU, allocated bytes over time split by category (from the trace's
// "memory" counters: series "allocated" plus one per category), reserved bytes (the caching
// allocator's "memory reserved" counter), the usable capacity, the peak,
// DataParallel's device_ids[0] / output_device roles with the imbalance, and the OOM point.
// Plain C++, tested headless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gui/time_axis.hpp"
#include "profiler/summary.hpp"
#include "profiler/trace.hpp"

namespace csim::gui {

struct GpuMemory {
  std::int32_t pid = 0;
  std::string name;       // "node 0 / GPU 0"
  int gpu = -1;           // global GPU index (-1: unknown)
  std::vector<TimeNs> t;  // sample times, ascending; a value holds until the next
  std::vector<std::vector<double>> by_category;  // [category][sample], bytes
  std::vector<double> allocated;  // [sample] bytes: the "allocated" series, else the sum
  double peak_bytes = 0;          // max of allocated
  TimeNs peak_t = 0;              // first time the peak is reached
  Bytes capacity_bytes = 0;       // usable memory (0: unknown)
  // The caching allocator's reserved bytes (counter "memory reserved", docs/memory.md): a step
  // line over the stacked allocated bytes; empty when the trace has none (real PyTorch traces).
  std::vector<TimeNs> reserved_t;
  std::vector<double> reserved;
  double peak_reserved_bytes = 0;
  bool device_ids0 = false;    // DataParallel's device_ids[0] (optimizer, reduced grads)
  bool output_device = false;  // DataParallel's output_device (gathered outputs, loss)
};

struct MemoryModel {
  std::vector<std::string> categories;  // stacking order, bottom first
  // Some sample's "allocated" exceeds the sum of its categories (a PyTorch profile_memory trace
  // records the allocator's total only, no category): the view stacks the rest as one band.
  bool has_unattributed = false;
  std::vector<GpuMemory> gpus;          // with memory samples, by GPU index then pid
  double max_bytes = 0;                 // largest of every peak and capacity: the common y scale
  double imbalance = 0;                 // max / mean of the peaks (Summary::imbalance)
  std::optional<prof::OomVerdict> oom;  // Summary::oom
  TimeNs t_min = 0, t_max = 0;          // extent of the samples
};

MemoryModel build_memory(const prof::Trace& trace, const prof::Summary& summary);

// The legend's name of the allocated bytes no category accounts for.
inline constexpr const char* kUnattributedMemory = "allocated (no breakdown)";

// One band of the stack drawn for a sample: a category's bytes, or (category -1) what the
// sample's allocated total holds beyond its categories' sum.
struct MemoryBand {
  int category = -1;  // index into MemoryModel::categories; -1: kUnattributedMemory
  double bytes = 0;
};

// The bands of sample S of G, bottom first: every category with bytes, then the unattributed
// rest when positive. Their bytes add up to g.allocated[s] (or to the categories' sum when it is
// larger), so the stack's top is the allocated curve whatever the trace records.
std::vector<MemoryBand> memory_bands(const GpuMemory& g, std::size_t s);

// [SECTION] Y scale and ticks (docs/simview.md, "Memory")

// How the lanes share the y axis. kShared (the default): every lane has the same top, so equal
// bytes are equal heights across GPUs (the DataParallel imbalance is visible at a glance).
// kPerGpu: each lane up to its own peak, to read the shape of a small GPU's curve; heights then do
// not compare across GPUs.
enum class MemoryScale { kShared, kPerGpu };

// "shared" / "per-gpu" (the --memory-scale values); false otherwise.
bool parse_memory_scale(const std::string& s, MemoryScale* out);

// The byte value at the top of GPU `gpu`'s lane. The largest allocated or reserved peak in scope
// (all GPUs for kShared, that GPU for kPerGpu), raised to the usable capacity when
// `to_capacity`, times 1.12 for the peak label's headroom; at least 1 byte.
double memory_y_top(const MemoryModel& m, std::size_t gpu, MemoryScale scale, bool to_capacity);

// Gridline values (bytes) for an axis [0, top_bytes]: multiples of a step of 1, 2 or 5 × 10^k
// units, the unit GiB (or MiB, KiB, B for smaller tops), the smallest such step that gives at most
// `max_ticks` lines above 0, ascending, each <= top_bytes. Example: top 25.6 GiB, 4 ticks → step
// 10 GiB → {10, 20} GiB; top 11.8 GiB → step 5 GiB → {5, 10} GiB.
std::vector<double> memory_ticks(double top_bytes, int max_ticks);

// Label of a tick value in the unit memory_ticks chose for `top_bytes`, without needless
// decimals: "10 GiB", "2.5 GiB", "0.5 GiB" (one unit per axis).
std::string memory_tick_label(double bytes, double top_bytes);

// One column of the decimated plot: the sample drawn over [x0, x1) pixels. Within one pixel only
// the sample with the largest allocated total is kept, so a peak never disappears when zoomed out.
struct MemoryColumn {
  double x0 = 0, x1 = 0;
  std::uint32_t sample = 0;
};

// The columns covering [0, width_px] of `view` for `g`: O(visible samples).
std::vector<MemoryColumn> memory_columns(const GpuMemory& g, const TimeView& view, double width_px);

// Index of the sample in effect at `t_ns` (the last one at or before it), -1 before the first.
int sample_at(const GpuMemory& g, double t_ns);

}  // namespace csim::gui
