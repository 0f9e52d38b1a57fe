// docs/summary.md, "Without a trace": the summary input made from the op timings directly.
#include "backends/common/run_summary.hpp"

#include <algorithm>

#include "backends/common/trace_builder.hpp"
#include "backends/common/trace_parts.hpp"
#include "core/program/step_spans.hpp"

namespace csim::backend {
namespace {

// The memory counters as prof::summarize reads them (docs/summary.md, "Memory" and "Without a
// trace"). Of the "memory" samples of a GPU (time order) it reads only: the largest allocated
// total; the first total above the GPU's capacity (its time); for each step window [s, e] the
// last sample before s and the largest in [s, e]; for each step end e the last sample at or before
// e (its total and its categories: every sample carries all of them) and the largest in the
// step before. With the step spans' starts and ends as cut times c_1 < ... < c_n, each of those
// is the last or the largest sample of one or more of the regions (-inf, c_1), {c_1},
// (c_1, c_2), ..., {c_n}, (c_n, inf). So the last and the largest sample of every region, and
// the first above capacity, in their order, give the same summary as all of them (the
// thousands build_trace writes, detail::add_allocated_counters: in simrun
// scenarios/gpt2_small_8xa100.json building them, 19.6 M instructions, and memory_growth reading
// them, 13.4 M, were a fifth of the run's 171.8 M), written by the same add_allocated_counters.
// Of the caching allocator's "memory reserved" the summary reads only the largest "reserved"
// value and whether a GPU has any (profiler/summary.cpp, reserved_peak): one sample per GPU
// holding that largest value.
void add_summary_memory_counters(prof::Trace& tr, const core::MemoryReport& mem) {
  std::vector<TimeNs> cuts;
  for (const prof::TraceEvent& e : tr.events) {
    if (e.cls != prof::EventClass::kAnnotation) continue;
    cuts.push_back(e.ts_ns);
    cuts.push_back(e.ts_ns + e.dur_ns);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // Region of t: 2i + 1 for t == c_i (1-based), 2i for c_i < t < c_{i+1}.
  const auto region_of = [&](TimeNs t) {
    const auto it = std::lower_bound(cuts.begin(), cuts.end(), t);
    const auto i = static_cast<std::size_t>(it - cuts.begin());
    return it != cuts.end() && *it == t ? 2 * i + 1 : 2 * i;
  };
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> last(2 * cuts.size() + 1), largest(2 * cuts.size() + 1);
  std::vector<std::size_t> kept;
  core::MemoryReport few;  // the kept samples, written as build_trace writes them all
  for (const core::GpuMemory& g : mem.gpus) {
    const std::vector<core::MemorySample>& ss = g.samples;
    std::fill(last.begin(), last.end(), kNone);
    std::fill(largest.begin(), largest.end(), kNone);
    kept.clear();
    for (std::size_t i = 0; i < ss.size(); ++i) {
      const std::size_t r = region_of(ss[i].t_ns);
      last[r] = i;
      if (largest[r] == kNone || ss[i].total > ss[largest[r]].total) largest[r] = i;
      if (g.capacity_bytes > 0 && ss[i].total > g.capacity_bytes && kept.empty()) kept.push_back(i);
    }
    for (std::size_t r = 0; r < last.size(); ++r) {
      if (last[r] == kNone) continue;
      kept.push_back(last[r]);
      kept.push_back(largest[r]);
    }
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    core::GpuMemory& f = few.gpus.emplace_back();
    f.gpu = g.gpu;
    f.samples.reserve(kept.size());
    for (const std::size_t i : kept) f.samples.push_back(ss[i]);
  }
  detail::add_allocated_counters(tr, few);
  for (const core::GpuAllocatorTimeline& g : mem.allocator.gpus) {
    if (g.samples.empty()) continue;
    Bytes peak = g.samples.front().reserved_bytes;
    for (const core::AllocatorSample& m : g.samples) peak = std::max(peak, m.reserved_bytes);
    prof::CounterSample& c = tr.counters.emplace_back();
    c.pid = g.gpu;
    c.name = prof::kReservedMemoryCounter;
    c.ts_ns = g.samples.front().t_ns;
    c.values.push_back({"reserved", static_cast<double>(peak)});  // conversion keeps the order
  }
}

}  // namespace

prof::Summary summarize_run(const core::Scenario& s, const core::Program& p,
                            const core::ExecutionResult& r, const core::MemoryReport& mem,
                            core::Progress* progress) {
  // Counted by op, twice: the step spans, then the events collected (on GPT-3 with every rank,
  // 4.7 M ops, most of the phase: the event vector's pages faulted in as it fills).
  core::ProgressCount count(progress, "summarising", 2 * static_cast<std::int64_t>(p.ops.size()),
                            "op passes");
  const std::vector<core::StepSpan> step_spans = core::step_spans(p, r.timings, &count);
  // Without ProfilerStep spans the summary takes every event's extent, host calls included
  // (docs/summary.md, "Steps"): that case reads the whole trace.
  if (step_spans.empty()) return prof::summarize(build_trace(s, p, r, mem, progress), progress);
  prof::Trace tr;
  tr.base_ns = 0;
  tr.world_size = static_cast<int>(p.active_gpus.size());
  detail::add_gpu_processes(tr, p, mem);
  // The events prof::summarize classifies (docs/summary.md, "Time split"), in build_trace's
  // order: per op its GIL wait on its host thread, then its device span. Every other event of the
  // trace has a class the summary's sweep skips.
  tr.events.reserve(p.ops.size());
  std::vector<prof::Arg> group_args;
  group_args.reserve(p.groups.size());
  for (const core::CommGroup& g : p.groups)
    group_args.push_back({"Process Group Description", g.name});
  for (const core::Op& op : p.ops) {
    count.add();
    const core::OpTiming& t = r.timings[static_cast<std::size_t>(op.id)];
    if (t.end_ns < 0) continue;  // not run (cancelled)
    const int pid = p.threads[static_cast<std::size_t>(op.thread)].gpu;
    if (t.gil_wait_ns > 0) {
      tr.events.push_back({pid,
                           host_tid(op.thread),
                           t.ready_ns,
                           t.gil_wait_ns,
                           {},
                           {},
                           prof::EventClass::kGilWait,
                           op.id,
                           -1,
                           {}});
    }
    prof::EventClass cls = prof::EventClass::kCommunication;
    switch (op.kind) {
      case core::OpKind::kCompute:
        cls = prof::EventClass::kCompute;
        break;
      case core::OpKind::kCopy:
        cls = prof::EventClass::kCopy;
        break;
      case core::OpKind::kCollective:
        break;
      default:
        continue;  // host work, markers, allocations and frees: no device span
    }
    const core::StreamDesc& st = p.streams[static_cast<std::size_t>(op.stream)];
    tr.events.push_back(
        {st.gpu, stream_tid(st.id), t.start_ns, t.end_ns - t.start_ns, {}, {}, cls, op.id, -1, {}});
    // A collective's group, as build_trace's "Process Group Description" names it (the summary's
    // communication by group, docs/summary.md).
    if (op.kind == core::OpKind::kCollective && op.group >= 0)
      tr.events.back().args.push_back(group_args[static_cast<std::size_t>(op.group)]);
  }
  count.finish();
  detail::add_step_annotations(tr, p, step_spans);
  add_summary_memory_counters(tr, mem);
  detail::add_metadata(tr, s, p, r, mem);
  return prof::summarize(tr, progress);
}

}  // namespace csim::backend
