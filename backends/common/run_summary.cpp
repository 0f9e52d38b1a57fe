// docs/summary.md, "Without a trace": the summary input made from the op timings directly.
#include "backends/common/run_summary.hpp"

#include <algorithm>

#include "backends/common/trace_builder.hpp"
#include "backends/common/trace_parts.hpp"
#include "core/step_spans.hpp"

namespace csim::backend {
namespace {

// The memory counters as prof::summarize reads them (docs/summary.md, "Memory"): "memory" whole
// (its peak, the peaks per step and the levels by category at step ends read the series), and of
// the caching allocator's "memory reserved" only the largest "reserved" value and whether a GPU
// has any (profiler/summary.cpp, reserved_peak). One sample per GPU holding that largest value
// therefore gives the same summary as the thousands build_trace writes (detail::
// add_memory_counters), each with its five named series: in a 8-GPU GPT-2 run those made a third
// of simrun's time and 18 MiB of its peak memory.
void add_summary_memory_counters(prof::Trace& tr, const core::MemoryReport& mem) {
  detail::add_allocated_counters(tr, mem);
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
                            const core::ExecutionResult& r, const core::MemoryReport& mem) {
  const std::vector<core::StepSpan> step_spans = core::step_spans(p, r.timings);
  // Without ProfilerStep spans the summary takes every event's extent, host calls included
  // (docs/summary.md, "Steps"): that case reads the whole trace.
  if (step_spans.empty()) return prof::summarize(build_trace(s, p, r, mem));
  prof::Trace tr;
  tr.base_ns = 0;
  tr.world_size = static_cast<int>(p.active_gpus.size());
  detail::add_gpu_processes(tr, p, mem);
  // The events prof::summarize classifies (docs/summary.md, "Time split"), in build_trace's
  // order: per op its GIL wait on its host thread, then its device span. Every other event of the
  // trace has a class the summary's sweep skips.
  tr.events.reserve(p.ops.size());
  for (const core::Op& op : p.ops) {
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
  }
  detail::add_step_annotations(tr, p, step_spans);
  add_summary_memory_counters(tr, mem);
  detail::add_metadata(tr, s, p, r, mem);
  return prof::summarize(tr);
}

}  // namespace csim::backend
