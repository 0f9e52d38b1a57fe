#include "core/program/memory_timeline.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace csim::core {
namespace {

// docs/memory.md, "First-step and steady-state peaks". `mem_ops` in execution order.
//  first step: the peak over the ops of steps <= 1 (setup included);
//  steady state, steps >= 2 simulated: the peak over their ops;
//  steady state, one step: at every memory op of the step, allocated + for each category c
//    max(0, R[c] - allocated[c]), where R[c] is what category c holds when the step ends: what
//    step 1 leaves resident is there from the start of step 2 (Adam's state, allocated at the
//    first step(), above all), so each point of step 1 is lifted by what it lacks of it.
// An OOM verdict is added when the steady-state peak exceeds capacity but no simulated
// allocation did; every verdict gets the would-be peak over capacity.
void steady_state_peaks(const Program& program, const std::vector<OpTiming>& timings,
                        const std::vector<OpId>& mem_ops, const std::vector<std::size_t>& index,
                        MemoryReport* rep) {
  const std::size_t n = rep->gpus.size();
  using ByCategory = std::array<Bytes, kNumMemCategories>;
  std::vector<ByCategory> cur(n, ByCategory{}), resident(n, ByCategory{});
  std::vector<Bytes> total(n, 0);
  // Applies op to its GPU's running state; returns the GPU's position, or n when not tracked.
  auto apply = [&](const Op& op) {
    if (op.gpu < 0 || static_cast<std::size_t>(op.gpu) >= index.size()) return n;
    const std::size_t k = index[static_cast<std::size_t>(op.gpu)];
    if (k == n) return n;
    const Bytes delta = op.kind == OpKind::kAlloc ? op.bytes : -op.bytes;
    cur[k][static_cast<int>(op.mem_category)] += delta;
    total[k] += delta;
    return k;
  };
  // Pass 1: the first step's peak, what each category holds at its end, the later steps' peak.
  bool later_steps = false;
  for (OpId id : mem_ops) {
    const Op& op = program.ops[id];
    const std::size_t k = apply(op);
    if (k == n) continue;
    GpuMemory& m = rep->gpus[k];
    if (op.step <= 1) {
      m.first_step_peak_bytes = std::max(m.first_step_peak_bytes, total[k]);
      resident[k] = cur[k];
    } else {
      later_steps = true;
      m.steady_peak_bytes = std::max(m.steady_peak_bytes, total[k]);
    }
  }
  if (!later_steps) {
    // Pass 2 (one step): project the steady state onto step 1.
    std::fill(cur.begin(), cur.end(), ByCategory{});
    std::fill(total.begin(), total.end(), 0);
    for (OpId id : mem_ops) {
      const Op& op = program.ops[id];
      const std::size_t k = apply(op);
      if (k == n) continue;
      Bytes lifted = total[k];
      for (int c = 0; c < kNumMemCategories; ++c)
        lifted += std::max<Bytes>(0, resident[k][c] - cur[k][c]);
      GpuMemory& m = rep->gpus[k];
      m.steady_projected = true;
      m.steady_peak_bytes = std::max(m.steady_peak_bytes, lifted);
      if (op.kind == OpKind::kAlloc && m.capacity_bytes > 0 && lifted > m.capacity_bytes &&
          !rep->oom) {
        rep->oom = OomVerdict{op.gpu,
                              id,
                              program.name_of(op),
                              op.bytes,
                              lifted - m.capacity_bytes,
                              m.capacity_bytes,
                              timings[id].start_ns};
        rep->oom->steady_state = true;
      }
    }
  }
  if (rep->oom) {
    const int g = rep->oom->gpu;
    if (g >= 0 && static_cast<std::size_t>(g) < index.size() &&
        index[static_cast<std::size_t>(g)] != n) {
      const GpuMemory& m = rep->gpus[index[static_cast<std::size_t>(g)]];
      rep->oom->would_be_peak_bytes = std::max(m.peak_bytes, m.steady_peak_bytes);
      rep->oom->over_capacity_bytes = rep->oom->would_be_peak_bytes - m.capacity_bytes;
    }
  }
}

}  // namespace

MemoryReport memory_timeline(const Program& program, const std::vector<OpTiming>& timings,
                             const ClusterSpec& cluster, Progress* progress) {
  MemoryReport rep;
  // Counted by op over the pass that reads every op's timing (docs/limits.md, "Progress"); the
  // sort and the passes over the memory ops after it follow at 100 %.
  ProgressCount count(progress, "analysing memory", static_cast<std::int64_t>(program.ops.size()),
                      "ops");
  std::vector<char> communicates(static_cast<std::size_t>(program.world_gpus), 0);
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::kCollective && op.gpu < program.world_gpus) communicates[op.gpu] = 1;
  }
  std::vector<int> tracked;
  for (int g : program.active_gpus) {
    if (program.symmetry.enabled() && program.symmetry.weight_of_gpu[g] == 0) continue;  // mirrored
    tracked.push_back(g);
  }
  // gpu -> position in rep.gpus (the last one listed wins, as a map's operator[] would); a GPU
  // not tracked maps to n.
  std::vector<std::size_t> index;
  for (int g : tracked) {
    const auto gi = static_cast<std::size_t>(g);
    if (index.size() <= gi) index.resize(gi + 1, SIZE_MAX);
    index[gi] = rep.gpus.size();
    GpuMemory m;
    m.gpu = g;
    m.capacity_bytes = usable_memory_bytes(cluster, communicates[g] != 0);
    rep.gpus.push_back(m);
  }
  for (std::size_t& k : index)
    if (k == SIZE_MAX) k = rep.gpus.size();
  // Memory ops (and markers, for the caching allocator) in execution order: by time, then by op id
  // (issue order) for equal times; (start, id) pairs are unique, so std::sort gives that order.
  std::vector<std::pair<TimeNs, OpId>> order;
  for (const Op& op : program.ops) {
    count.add();
    if ((op.kind == OpKind::kAlloc || op.kind == OpKind::kFree || op.kind == OpKind::kMarker) &&
        timings[op.id].start_ns >= 0)
      order.emplace_back(timings[op.id].start_ns, op.id);
  }
  count.finish();
  std::sort(order.begin(), order.end());
  std::vector<OpId> ordered, mem_ops;
  ordered.reserve(order.size());
  mem_ops.reserve(order.size());
  for (const auto& [t, id] : order) {
    ordered.push_back(id);
    const OpKind kind = program.ops[id].kind;
    if (kind == OpKind::kAlloc || kind == OpKind::kFree) mem_ops.push_back(id);
  }
  std::vector<std::array<Bytes, kNumMemCategories>> current(rep.gpus.size());
  std::vector<Bytes> total(rep.gpus.size(), 0);
  for (OpId id : mem_ops) {
    const Op& op = program.ops[id];
    if (op.gpu < 0 || static_cast<std::size_t>(op.gpu) >= index.size()) continue;
    const std::size_t k = index[static_cast<std::size_t>(op.gpu)];
    if (k == rep.gpus.size()) continue;
    const Bytes delta = op.kind == OpKind::kAlloc ? op.bytes : -op.bytes;
    current[k][static_cast<int>(op.mem_category)] += delta;
    total[k] += delta;
    GpuMemory& m = rep.gpus[k];
    const TimeNs t = timings[id].start_ns;
    if (!m.samples.empty() && m.samples.back().t_ns == t) {
      m.samples.back().total = total[k];  // several changes at one instant: keep the last state
      m.samples.back().by_category = current[k];
    } else {
      m.samples.push_back(MemorySample{t, total[k], current[k]});
    }
    if (total[k] > m.peak_bytes) {
      m.peak_bytes = total[k];
      m.peak_at_ns = t;
      m.at_peak = current[k];
    }
    if (op.kind == OpKind::kAlloc && total[k] > m.capacity_bytes && m.capacity_bytes > 0) {
      if (!rep.oom || t < rep.oom->at_ns) {
        rep.oom = OomVerdict{
            op.gpu,           id, program.name_of(op), op.bytes, total[k] - m.capacity_bytes,
            m.capacity_bytes, t};
      }
    }
  }
  steady_state_peaks(program, timings, mem_ops, index, &rep);
  std::vector<int> gpus;
  std::vector<Bytes> capacity;
  for (const GpuMemory& m : rep.gpus) {
    gpus.push_back(m.gpu);
    capacity.push_back(m.capacity_bytes);
  }
  rep.allocator = simulate_caching_allocator(program, timings, ordered, gpus, capacity,
                                             program.expandable_segments);
  // docs/memory.md, "OOM verdict": every allocation fits, but the caching allocator cannot serve
  // one even after releasing its cache (reserved + the segment it needs > usable: the reserved
  // peak printed is above the usable memory only then, the model going on with the segment).
  // With expandable segments that is an OOM: every free page was unmapped first, so what is
  // missing is the live blocks' pages. With the default allocator it is fragmentation, which the
  // Program's coarse blocks overstate (a pipeline segment's saved activations per micro-batch
  // and Adam's state each one block, where PyTorch allocates tensor by tensor into cached
  // holes): the same ops go through an allocator with expandable segments, and only when that
  // one runs out too is it the verdict; else the summary's note says why not.
  if (!rep.oom && rep.allocator.oom) {
    AllocatorOom& a = *rep.allocator.oom;
    bool verdict = a.expandable;
    if (!a.expandable) {
      const AllocatorReport pages =
          simulate_caching_allocator(program, timings, ordered, gpus, capacity, true);
      for (const GpuAllocatorTimeline& g : pages.gpus)
        if (g.gpu == a.gpu) a.expandable_peak_reserved_bytes = g.peak_reserved_bytes;
      a.expandable_oom = pages.oom.has_value();
      verdict = a.expandable_oom;
    }
    if (verdict) {
      OomVerdict v{a.gpu,
                   a.op,
                   a.op_name,
                   a.requested_bytes,
                   a.reserved_bytes + a.segment_bytes - a.capacity_bytes,
                   a.capacity_bytes,
                   a.at_ns};
      v.allocator = true;
      v.expandable_segments = a.expandable;
      v.reserved_bytes = a.reserved_bytes;
      v.segment_bytes = a.segment_bytes;
      v.allocated_bytes = a.allocated_bytes;
      for (const GpuAllocatorTimeline& g : rep.allocator.gpus) {
        if (g.gpu != a.gpu) continue;
        v.would_be_peak_bytes = g.peak_reserved_bytes;
        v.over_capacity_bytes = g.peak_reserved_bytes - g.capacity_bytes;
      }
      rep.oom = v;
    }
  }
  return rep;
}

}  // namespace csim::core
