// [SECTION] index: lanes, host events, device events, flows, steps, memory counters, metadata.
#include "backends/common/trace_builder.hpp"

#include "core/step_spans.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

namespace csim::backend {
namespace {

using core::Op;
using core::OpKind;
using prof::EventClass;

std::string runtime_call(const Op& op) {
  switch (op.kind) {
    case OpKind::kCompute: return "cudaLaunchKernel";
    case OpKind::kCopy: return "cudaMemcpyAsync";
    case OpKind::kCollective: return std::string("nccl") + core::to_string(op.collective);
    default: return "cuda_runtime";
  }
}

// NCCL kernel names as the PyTorch profiler shows them start with "ncclDevKernel_"/"ncclKernel_".
std::string nccl_kernel_name(const Op& op) { return std::string("ncclDevKernel_") + core::to_string(op.collective) + " (" + op.name + ")"; }

prof::LaneRole lane_role(core::StreamRole r) {
  switch (r) {
    case core::StreamRole::kCompute: return prof::LaneRole::kCompute;
    case core::StreamRole::kComm: return prof::LaneRole::kComm;
    case core::StreamRole::kCopy: return prof::LaneRole::kCopy;
  }
  return prof::LaneRole::kOther;
}

}  // namespace

prof::Trace build_trace(const core::Scenario& s, const core::Program& p, const core::ExecutionResult& r,
                        const core::MemoryReport& mem) {
  prof::Trace tr;
  tr.base_ns = 0;
  tr.world_size = static_cast<int>(p.active_gpus.size());
  const auto& timing = r.timings;

  // [SECTION] Lanes: one process per active GPU; its host threads, then its streams.
  std::map<int, int> rank_of;  // gpu -> rank (position in active_gpus)
  for (std::size_t i = 0; i < p.active_gpus.size(); ++i) rank_of[p.active_gpus[i]] = static_cast<int>(i);
  std::map<int, Bytes> capacity;
  for (const core::GpuMemory& g : mem.gpus) capacity[g.gpu] = g.capacity_bytes;
  for (int g : p.active_gpus) {
    // Rank symmetry: a mirrored GPU has no ops of its own; its representative stands for it.
    if (p.symmetry.enabled() && p.symmetry.weight_of_gpu[g] == 0) continue;
    prof::ProcessInfo pi;
    pi.pid = g;
    pi.node = g / p.gpus_per_node;
    pi.gpu = g;
    pi.rank = rank_of[g];
    pi.name = prof::gpu_process_name(g, p.gpus_per_node);
    pi.capacity_bytes = capacity[g];
    pi.sort_index = g;
    tr.processes.push_back(pi);
  }
  std::map<int, int> first_thread_of_gpu;
  for (const core::ThreadDesc& t : p.threads) {
    const core::ProcessDesc& proc = p.processes[t.process];
    prof::ThreadInfo ti;
    ti.pid = t.gpu;
    ti.tid = host_tid(t.id);
    ti.name = t.name + " [" + proc.name + (proc.has_gil ? ", GIL" : "") + "]";
    ti.role = prof::LaneRole::kHost;
    ti.sort_index = t.id;
    tr.threads.push_back(ti);
    first_thread_of_gpu.emplace(t.gpu, t.id);
  }
  for (const core::StreamDesc& st : p.streams) {
    prof::ThreadInfo ti;
    ti.pid = st.gpu;
    ti.tid = stream_tid(st.id);
    ti.name = "stream " + std::to_string(st.id) + " " + st.name;
    ti.role = lane_role(st.role);
    ti.sort_index = 1000 + st.id;
    tr.threads.push_back(ti);
  }

  // [SECTION] Host and device events (about three events and one flow per op: reserve once)
  tr.events.reserve(p.ops.size() * 3);
  tr.flows.reserve(p.ops.size());
  for (const Op& op : p.ops) {
    const core::OpTiming& t = timing[op.id];
    if (t.end_ns < 0) continue;  // not run (cancelled)
    const int pid = p.threads[op.thread].gpu;
    const int htid = host_tid(op.thread);
    if (t.gil_wait_ns > 0) {
      tr.events.push_back({pid, htid, t.ready_ns, t.gil_wait_ns, "GIL wait", "gil_wait", EventClass::kGilWait, op.id, -1, {}});
    }
    const std::int64_t corr = op.id + 1;
    if (op.kind == OpKind::kHostWork) {
      prof::TraceEvent e{pid, htid, t.start_ns, t.end_ns - t.start_ns, op.name, "cpu_op", EventClass::kHost, op.id, -1, {}};
      e.args.push_back({"phase", op.phase});
      tr.events.push_back(std::move(e));
      continue;
    }
    if (op.kind == OpKind::kMarker || op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) continue;
    // Python part (GIL held), then the dispatch + launch call (GIL released).
    const TimeNs dispatch_start = t.issue_end_ns - op.dispatch_ns;
    if (op.python_ns > 0) {
      tr.events.push_back({pid, htid, dispatch_start - op.python_ns, op.python_ns, op.name, "cpu_op", EventClass::kHost, op.id, -1,
                           {{"phase", op.phase}}});
    }
    if (op.dispatch_ns > 0) {
      tr.events.push_back({pid, htid, dispatch_start, op.dispatch_ns, runtime_call(op), "cuda_runtime", EventClass::kHost, op.id, corr, {}});
    }
    const core::StreamDesc& st = p.streams[op.stream];
    prof::TraceEvent e;
    e.pid = st.gpu;
    e.tid = stream_tid(st.id);
    e.ts_ns = t.start_ns;
    e.dur_ns = t.end_ns - t.start_ns;
    e.op_id = op.id;
    e.correlation = corr;
    if (op.kind == OpKind::kCompute) {
      e.name = op.name;
      e.cat = "kernel";
      e.cls = EventClass::kCompute;
      e.args = {{"kind", std::string(core::to_string(op.compute_kind))}, {"dtype", std::string(core::to_string(op.dtype))},
                {"flops", op.flops}, {"bytes", static_cast<std::int64_t>(op.bytes)}};
    } else if (op.kind == OpKind::kCopy) {
      e.name = op.name;
      e.cat = "gpu_memcpy";
      e.cls = EventClass::kCopy;
      e.args = {{"copy_kind", std::string(core::to_string(op.copy_kind))}, {"bytes", static_cast<std::int64_t>(op.bytes)}};
      if (op.peer_gpu >= 0) e.args.push_back({"src_device", static_cast<std::int64_t>(op.peer_gpu)});
    } else {
      // A collective simulated elsewhere (core/program_slice.hpp) has no group here.
      std::string ranks = "[";
      if (op.group >= 0) {
        const core::CommGroup& g = p.groups[op.group];
        for (std::size_t i = 0; i < g.gpus.size(); ++i) ranks += (i ? ", " : "") + std::to_string(g.gpus[i]);
      }
      ranks += "]";
      const std::int64_t nelems = op.bytes / 4;  // payloads are counted in fp32 elements
      e.name = nccl_kernel_name(op);
      e.cat = "kernel";
      e.cls = EventClass::kCommunication;
      e.args = {{"Collective name", std::string(core::to_string(op.collective))},
                {"In msg nelems", nelems},
                {"Out msg nelems", nelems},
                {"Group size", static_cast<std::int64_t>(op.group >= 0 ? p.groups[op.group].gpus.size() : 0)},
                {"Process Group Ranks", ranks},
                {"dtype", std::string("Float")},
                {"bytes", static_cast<std::int64_t>(op.bytes)}};
      if (op.root >= 0) e.args.push_back({"root", static_cast<std::int64_t>(op.root)});
    }
    if (op.fixed_ns >= 0) e.args.push_back({"simulated_elsewhere_ns", static_cast<std::int64_t>(op.fixed_ns)});
    e.args.push_back({"phase", op.phase});
    if (op.batch >= 0) e.args.push_back({"batch", op.batch});
    e.args.push_back({"step", static_cast<std::int64_t>(op.step)});
    if (op.dispatch_ns > 0) {
      tr.flows.push_back({corr, "ac2g", "ac2g", pid, htid, dispatch_start, e.pid, e.tid, e.ts_ns});
    }
    tr.events.push_back(std::move(e));
  }

  // [SECTION] Cross-GPU dependency flows (a stream waiting for another GPU's op).
  std::int64_t flow_id = static_cast<std::int64_t>(p.ops.size()) + 1;
  for (const Op& op : p.ops) {
    if (op.stream < 0 || timing[op.id].start_ns < 0) continue;
    for (const core::Dep& d : op.deps) {
      const Op& src = p.ops[d.op];
      if (d.kind != core::DepKind::kStreamWaits || src.stream < 0 || src.gpu == op.gpu || timing[d.op].end_ns < 0) continue;
      tr.flows.push_back({flow_id++, "dependency", "dependency", src.gpu, stream_tid(src.stream), timing[d.op].end_ns, op.gpu,
                          stream_tid(op.stream), timing[op.id].start_ns});
    }
  }

  // [SECTION] ProfilerStep#N spans per GPU, on the GPU's first host thread (its training loop, as
  // profiler.step() marks it): from the loop reaching the step's first op to the end of the step's
  // last op on that GPU. Other threads' early starts (data-loader workers prefetching later
  // batches) do not move the start; they still count for the end.
  // core/step_spans.cpp computes them (sweeps read the step time from the same spans).
  for (const core::StepSpan& ss : core::step_spans(p, timing)) {
    tr.events.push_back({ss.gpu, host_tid(first_thread_of_gpu[ss.gpu]), ss.start_ns, ss.end_ns - ss.start_ns,
                         "ProfilerStep#" + std::to_string(ss.step), "user_annotation", EventClass::kAnnotation, -1, -1, {}});
  }

  // [SECTION] Memory counters: allocated bytes per GPU, in total and by category.
  for (const core::GpuMemory& g : mem.gpus) {
    for (const core::MemorySample& m : g.samples) {
      prof::CounterSample c;
      c.pid = g.gpu;
      c.name = "memory";
      c.ts_ns = m.t_ns;
      c.values.push_back({"allocated", static_cast<double>(m.total)});
      for (int k = 0; k < core::kNumMemCategories; ++k) {
        c.values.push_back({core::to_string(static_cast<core::MemCategory>(k)), static_cast<double>(m.by_category[k])});
      }
      tr.counters.push_back(std::move(c));
    }
  }
  // Caching allocator (docs/memory.md; docs/trace-format.md "Events"): reserved bytes next to the
  // allocated ones, in a counter of its own so that viewers stacking the "memory" series by
  // category do not stack it.
  for (const core::GpuAllocatorTimeline& g : mem.allocator.gpus) {
    for (const core::AllocatorSample& m : g.samples) {
      prof::CounterSample c;
      c.pid = g.gpu;
      c.name = prof::kReservedMemoryCounter;
      c.ts_ns = m.t_ns;
      c.values.push_back({"reserved", static_cast<double>(m.reserved_bytes)});
      c.values.push_back({"allocated_blocks", static_cast<double>(m.allocated_bytes)});
      c.values.push_back({"cached_free", static_cast<double>(m.reserved_bytes - m.allocated_bytes)});
      c.values.push_back({"largest_free_block", static_cast<double>(m.largest_free_block_bytes)});
      c.values.push_back({"segments", static_cast<double>(m.segments)});
      tr.counters.push_back(std::move(c));
    }
  }

  // [SECTION] Metadata
  nlohmann::json& md = tr.metadata;
  md["scenario"] = {{"name", s.name}, {"description", s.description}, {"file", s.file}};
  md["strategy"] = {{"kind", core::to_string(s.strategy.kind)}, {"label", p.strategy_label}, {"device_ids", s.strategy.device_ids}};
  if (s.strategy.kind == core::StrategyKind::kDataParallel) md["strategy"]["output_device"] = s.strategy.output_device;
  md["backend"] = r.backend;
  md["measured"] = r.measured;
  md["complete"] = r.complete;
  if (!r.complete) md["steps_completed"] = completed_steps(p, r);
  md["samples_per_step"] = p.samples_per_step;
  md["steps"] = p.steps;
  md["cluster"] = {{"nodes", s.cluster.nodes}, {"gpus_per_node", s.cluster.gpus_per_node}, {"gpu", s.cluster.gpu.name},
                   {"intra", core::to_string(s.cluster.intra.kind)}};
  md["model"] = {{"name", s.model.name}, {"params", s.model.total_params()}, {"layers", s.model.layers.size()}};
  md["precision"] = core::to_string(s.training.precision);
  // MFU/HFU inputs (docs/program.md, "FLOPs utilisation"; docs/summary.md, "MFU and HFU").
  md["model_flops_per_step"] = p.model_flops_per_step;
  md["hardware_flops_per_step"] = p.hardware_flops_per_step;
  md["peak_flops_per_gpu"] = s.cluster.gpu.peak_flops_per_s(core::precision_bytes(s.training.precision, s.training.amp_dtype).compute);
  if (mem.oom) {
    md["oom"] = {{"gpu", mem.oom->gpu}, {"op", mem.oom->op_name}, {"shortfall_bytes", mem.oom->shortfall_bytes},
                 {"at_ns", mem.oom->at_ns}, {"requested_bytes", mem.oom->requested_bytes}, {"capacity_bytes", mem.oom->capacity_bytes}};
  } else {
    md["oom"] = nullptr;
  }
  // Caching allocator (docs/memory.md): its OOM (reserved + the new segment > usable memory after
  // releasing the cache, which fragmentation can cause before allocated bytes reach capacity) and
  // every torch.cuda.empty_cache() with what it released.
  if (mem.allocator.oom) {
    const core::AllocatorOom& o = *mem.allocator.oom;
    md["allocator_oom"] = {{"gpu", o.gpu}, {"op", o.op_name}, {"requested_bytes", o.requested_bytes},
                           {"segment_bytes", o.segment_bytes}, {"reserved_bytes", o.reserved_bytes},
                           {"allocated_bytes", o.allocated_bytes}, {"capacity_bytes", o.capacity_bytes}, {"at_ns", o.at_ns}};
  } else {
    md["allocator_oom"] = nullptr;
  }
  nlohmann::json empties = nlohmann::json::array();
  for (const core::GpuAllocatorTimeline& g : mem.allocator.gpus) {
    for (const core::EmptyCacheEffect& e : g.empty_cache) {
      empties.push_back({{"gpu", g.gpu}, {"step", e.step}, {"at_ns", e.t_ns}, {"released_bytes", e.released_bytes},
                         {"reserved_after_bytes", e.reserved_after_bytes}, {"allocated_bytes", e.allocated_bytes}});
    }
  }
  if (!empties.empty()) md["empty_cache"] = empties;
  std::vector<std::string> warnings = s.warnings;
  warnings.insert(warnings.end(), p.warnings.begin(), p.warnings.end());
  md["warnings"] = warnings;
  md["notes"] = r.notes;
  if (p.symmetry.enabled()) {
    // docs/trace-format.md, "Metadata": which simulated GPU stands for how many active GPUs.
    // Each mirrored GPU as [gpu, rank, representative GPU]: the representative is the image of the
    // GPU under the mirror that maps the GPU onto a simulated one.
    nlohmann::json mirrors = nlohmann::json::array();
    int simulated = 0;
    for (int g : p.active_gpus) {
      if (p.symmetry.weight_of_gpu[g] > 0) {
        ++simulated;
        continue;
      }
      int rep = -1;
      for (const std::vector<int>& img : p.symmetry.images) {
        if (img[g] >= 0 && p.symmetry.weight_of_gpu[img[g]] > 0) {
          rep = img[g];
          break;
        }
      }
      mirrors.push_back({g, rank_of[g], rep});
    }
    md["rank_symmetry"] = {{"active_gpus", p.active_gpus.size()}, {"simulated_gpus", simulated}, {"mirrors", mirrors}};
  }
  return tr;
}

int completed_steps(const core::Program& p, const core::ExecutionResult& r) {
  std::vector<char> missing(static_cast<std::size_t>(std::max(p.steps, 0)) + 1, 0);
  for (const Op& op : p.ops) {
    if (op.step > 0 && op.step <= p.steps && r.timings[op.id].end_ns < 0) missing[op.step] = 1;
  }
  int k = 0;
  while (k < p.steps && !missing[k + 1]) ++k;
  return k;
}

int keep_completed_steps(const core::Program& p, core::ExecutionResult* r) {
  const int k = completed_steps(p, *r);
  for (const Op& op : p.ops) {
    if (op.step > k) r->timings[op.id] = core::OpTiming{};
  }
  return k;
}

}  // namespace csim::backend
