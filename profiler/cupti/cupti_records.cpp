// CUPTI records -> trace additions (cupti_records.hpp). Plain C++: the conventions are those of
// backends/common/trace_builder.cpp (one process per GPU, Kineto categories, ac2g flows).
#include "profiler/cupti/cupti_records.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "profiler/trace_classify.hpp"

namespace csim::cupti {
namespace {

const core::Op* op_of(const core::Program& p, std::int64_t id) {
  if (id < 0 || id >= static_cast<std::int64_t>(p.ops.size())) return nullptr;
  return &p.ops[static_cast<std::size_t>(id)];
}

const char* category(RecordKind k) {
  switch (k) {
    case RecordKind::kKernel:
      return "kernel";
    case RecordKind::kMemcpy:
      return "gpu_memcpy";
    case RecordKind::kMemset:
      return "gpu_memset";
    case RecordKind::kSync:
      return "cuda_sync";
    case RecordKind::kRuntime:
      return "cuda_runtime";
    case RecordKind::kDriver:
      return "cuda_driver";
    case RecordKind::kMarker:
      return "nvtx";
  }
  return "other";
}

// Builds the CUPTI lanes as records need them: processes for GPUs the trace lacks (a record on a
// GPU with no op of the Program), one thread per (GPU, CUPTI stream) and per (GPU, OS thread).
class Lanes {
 public:
  Lanes(const core::Program& p, prof::Trace* t) : p_(p), t_(t) {
    for (const prof::ThreadInfo& th : t->threads) have_.insert({th.pid, th.tid});
    for (std::size_t i = 0; i < p.active_gpus.size(); ++i)
      rank_of_[p.active_gpus[i]] = static_cast<int>(i);
  }

  std::int32_t stream(int gpu, std::int64_t stream_id) {
    const std::int64_t s = std::max<std::int64_t>(stream_id, 0);
    const auto tid = static_cast<std::int32_t>(kStreamTidBase + s);
    add(gpu, tid, "CUPTI stream " + std::to_string(s));
    return tid;
  }
  std::int32_t host(int gpu, std::int64_t os_thread) {
    const int n = thread_index(os_thread);
    const auto tid = kHostTidBase + n;
    add(gpu, tid,
        "CUPTI host thread " + std::to_string(n) + " (tid " + std::to_string(os_thread) + ")");
    return tid;
  }
  std::int32_t nvtx(int gpu, std::int64_t os_thread) {
    const int n = thread_index(os_thread);
    const auto tid = kNvtxTidBase + n;
    add(gpu, tid, "CUPTI NVTX, host thread " + std::to_string(n));
    return tid;
  }

 private:
  // OS thread ids are large and arbitrary: lanes are numbered by first appearance instead.
  int thread_index(std::int64_t os_thread) {
    return threads_.try_emplace(os_thread, static_cast<int>(threads_.size())).first->second;
  }
  void add(int gpu, std::int32_t tid, std::string name) {
    if (t_->process(gpu) == nullptr) {
      prof::ProcessInfo pi;
      pi.pid = gpu;
      pi.gpu = gpu;
      pi.node = p_.gpus_per_node > 0 ? gpu / p_.gpus_per_node : -1;
      const auto r = rank_of_.find(gpu);
      pi.rank = r != rank_of_.end() ? r->second : -1;
      pi.name = prof::gpu_process_name(gpu, p_.gpus_per_node);
      pi.sort_index = gpu;
      t_->processes.push_back(std::move(pi));
    }
    if (!have_.insert({gpu, tid}).second) return;
    prof::ThreadInfo ti;
    ti.pid = gpu;
    ti.tid = tid;
    ti.name = std::move(name);
    ti.role = prof::LaneRole::kOther;  // see the header: summaries keep judging the op lanes
    ti.sort_index = tid;
    t_->threads.push_back(std::move(ti));
  }

  const core::Program& p_;
  prof::Trace* t_;
  std::set<std::pair<std::int32_t, std::int32_t>> have_;
  std::map<std::int64_t, int> threads_;
  std::map<int, int> rank_of_;
};

}  // namespace

const char* to_string(RecordKind k) {
  switch (k) {
    case RecordKind::kKernel:
      return "kernel";
    case RecordKind::kMemcpy:
      return "memcpy";
    case RecordKind::kMemset:
      return "memset";
    case RecordKind::kSync:
      return "sync";
    case RecordKind::kRuntime:
      return "runtime";
    case RecordKind::kDriver:
      return "driver";
    case RecordKind::kMarker:
      return "marker";
  }
  return "?";
}

void resolve_op_ids(std::vector<Record>& records,
                    const std::map<std::int64_t, std::int64_t>& external_of_correlation) {
  for (Record& r : records) {
    if (r.op_id >= 0 || r.correlation < 0) continue;
    const auto it = external_of_correlation.find(r.correlation);
    if (it != external_of_correlation.end()) r.op_id = it->second;
  }
}

std::vector<OpGpuTime> gpu_time_by_op(const std::vector<Record>& records) {
  std::map<std::int64_t, OpGpuTime> by_op;
  for (const Record& r : records) {
    if (!is_gpu_record(r.kind) || r.op_id < 0) continue;
    OpGpuTime& t = by_op[r.op_id];
    t.op = static_cast<core::OpId>(r.op_id);
    const TimeNs dur = std::max<TimeNs>(0, r.end_ns - r.start_ns);
    if (r.kind == RecordKind::kKernel) {
      t.kernel_ns += dur;
      ++t.kernels;
    } else {
      t.copy_ns += dur;
      ++t.copies;
    }
  }
  std::vector<OpGpuTime> out;
  out.reserve(by_op.size());
  for (const auto& [id, t] : by_op) out.push_back(t);
  return out;
}

AppendStats append_to_trace(const std::vector<Record>& records, const core::Program& program,
                            prof::Trace* trace) {
  AppendStats st;
  st.records = static_cast<std::int64_t>(records.size());
  // CUPTI numbers its correlations from 1 in every process: shift them past the ids the trace
  // already uses (trace_builder's op.id + 1 and dependency flow ids), as rank_symmetry does.
  std::int64_t base = 0;
  for (const prof::TraceEvent& e : trace->events) base = std::max(base, e.correlation + 1);
  for (const prof::FlowEvent& f : trace->flows) base = std::max(base, f.id + 1);
  const auto shifted = [base](std::int64_t c) { return c >= 0 ? base + c : -1; };
  const auto gpu_of = [&program](const Record& r) {
    if (r.gpu >= 0) return r.gpu;
    const core::Op* op = op_of(program, r.op_id);
    return op != nullptr ? op->gpu : -1;
  };
  // The op lanes' own events, to carry the per-op sums (before anything is appended).
  std::map<std::int64_t, std::size_t> op_event;
  for (std::size_t i = 0; i < trace->events.size(); ++i) {
    const prof::TraceEvent& e = trace->events[i];
    if (e.op_id >= 0 && e.tid < kStreamTidBase && prof::is_gpu_work(e.cls))
      op_event.try_emplace(e.op_id, i);
  }
  Lanes lanes(program, trace);

  // [SECTION] GPU records: kernels, memcpys, memsets on their GPU's CUPTI stream lanes.
  struct Placed {
    std::int32_t pid, tid;
    TimeNs ts;
  };
  std::map<std::int64_t, Placed> gpu_work_of;  // correlation -> its first GPU record's place
  for (const Record& r : records) {
    if (!is_gpu_record(r.kind)) continue;
    ++st.gpu_records;
    if (r.op_id < 0) ++st.gpu_records_without_op;
    const int gpu = gpu_of(r);
    if (gpu < 0) {
      ++st.skipped;
      continue;
    }
    prof::TraceEvent e;
    e.pid = gpu;
    e.tid = lanes.stream(gpu, r.stream);
    e.ts_ns = r.start_ns;
    e.dur_ns = std::max<TimeNs>(0, r.end_ns - r.start_ns);
    e.name = r.name;
    e.cat = category(r.kind);
    e.cls = prof::classify(e.cat, e.name);
    e.op_id = r.op_id;
    e.correlation = shifted(r.correlation);
    if (const core::Op* op = op_of(program, r.op_id)) e.args.push_back({"op", program.name_of(*op)});
    if (r.kind != RecordKind::kKernel)
      e.args.push_back({"bytes", static_cast<std::int64_t>(r.bytes)});
    if (!r.copy_kind.empty()) e.args.push_back({"cupti_copy_kind", r.copy_kind});
    if (r.correlation >= 0) {
      e.args.push_back({"cupti_correlation", r.correlation});
      gpu_work_of.try_emplace(r.correlation, Placed{e.pid, e.tid, e.ts_ns});
    }
    trace->events.push_back(std::move(e));
    ++st.events;
  }

  // [SECTION] Launches: API calls that issued GPU work, on the GPU that ran it; the earliest
  // call of a correlation (the runtime call around a driver call it made) starts the ac2g flow.
  std::map<std::int64_t, std::size_t> launch_of;  // correlation -> record index
  std::map<std::int64_t, int> pid_of_thread;      // OS thread -> GPU of its first launch
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    if (!is_api_record(r.kind) || gpu_work_of.count(r.correlation) == 0) continue;
    const Placed& work = gpu_work_of.at(r.correlation);
    prof::TraceEvent e;
    e.pid = work.pid;
    e.tid = lanes.host(work.pid, r.thread);
    e.ts_ns = r.start_ns;
    e.dur_ns = std::max<TimeNs>(0, r.end_ns - r.start_ns);
    e.name = r.name;
    e.cat = category(r.kind);
    e.cls = prof::EventClass::kHost;
    e.op_id = r.op_id;
    e.correlation = shifted(r.correlation);
    e.args.push_back({"cupti_correlation", r.correlation});
    pid_of_thread.try_emplace(r.thread, e.pid);
    trace->events.push_back(std::move(e));
    ++st.events;
    auto [it, fresh] = launch_of.try_emplace(r.correlation, i);
    const Record& held = records[it->second];
    if (!fresh && (r.start_ns < held.start_ns ||
                   (r.start_ns == held.start_ns && r.kind == RecordKind::kRuntime &&
                    held.kind == RecordKind::kDriver)))
      it->second = i;
  }
  for (const auto& [corr, i] : launch_of) {
    const Record& r = records[i];
    const Placed& to = gpu_work_of.at(corr);
    // The launch event sits on its thread's lane under the GPU it launched to (above).
    trace->flows.push_back({shifted(corr), "ac2g", "ac2g", to.pid, lanes.host(to.pid, r.thread),
                            r.start_ns, to.pid, to.tid, to.ts});
    ++st.flows;
  }

  // [SECTION] Synchronisation waits (on the waiting thread's lane when its call is known, else on
  // the stream waited for) and NVTX ranges (on their thread's NVTX lane).
  std::map<std::int64_t, std::int64_t> thread_of_call;
  for (const Record& r : records) {
    if (is_api_record(r.kind) && r.correlation >= 0)
      thread_of_call.try_emplace(r.correlation, r.thread);
  }
  int first_gpu = -1;
  for (const prof::ProcessInfo& pi : trace->processes) {
    if (pi.gpu >= 0 && (first_gpu < 0 || pi.gpu < first_gpu)) first_gpu = pi.gpu;
  }
  for (const Record& r : records) {
    if (r.kind != RecordKind::kSync && r.kind != RecordKind::kMarker) continue;
    prof::TraceEvent e;
    if (r.kind == RecordKind::kSync) {
      const int gpu = gpu_of(r);
      const auto call = thread_of_call.find(r.correlation);
      if (gpu < 0 || (call == thread_of_call.end() && r.stream < 0)) {
        ++st.skipped;
        continue;
      }
      e.pid = gpu;
      e.tid = call != thread_of_call.end() ? lanes.host(gpu, call->second)
                                           : lanes.stream(gpu, r.stream);
      e.cls = prof::EventClass::kOther;
    } else {
      // An NVTX range belongs to a thread, not a GPU: it goes under the GPU that thread first
      // launched to, else under the lowest GPU.
      const auto placed = pid_of_thread.find(r.thread);
      const int pid = placed != pid_of_thread.end() ? placed->second : first_gpu;
      if (pid < 0) {
        ++st.skipped;
        continue;
      }
      e.pid = pid;
      e.tid = lanes.nvtx(pid, r.thread);
      e.cls = prof::EventClass::kAnnotation;
    }
    e.ts_ns = r.start_ns;
    e.dur_ns = std::max<TimeNs>(0, r.end_ns - r.start_ns);
    e.name = r.name;
    e.cat = category(r.kind);
    e.op_id = r.op_id;
    trace->events.push_back(std::move(e));
    ++st.events;
  }

  // [SECTION] Per-op sums on the op's own event, and the stats in the metadata.
  for (const OpGpuTime& t : gpu_time_by_op(records)) {
    const auto it = op_event.find(t.op);
    if (it == op_event.end()) continue;
    prof::TraceEvent& e = trace->events[it->second];
    if (t.kernels > 0) e.args.push_back({"cupti_kernel_ns", t.kernel_ns});
    if (t.copies > 0) e.args.push_back({"cupti_copy_ns", t.copy_ns});
    ++st.ops_with_gpu_time;
  }
  nlohmann::json& md = trace->metadata["cupti"];
  md["records"] = st.records;
  md["gpu_records"] = st.gpu_records;
  md["gpu_records_without_op"] = st.gpu_records_without_op;
  md["events"] = st.events;
  md["flows"] = st.flows;
  md["skipped"] = st.skipped;
  md["ops_with_gpu_time"] = st.ops_with_gpu_time;
  return st;
}

}  // namespace csim::cupti
