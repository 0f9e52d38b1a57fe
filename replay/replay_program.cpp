// Stage 3: sorted traces -> Program (docs/replay.md, "Stages", "Host time", "Edges").
//
// Index
//   [SECTION] RankBuilder     one trace: window, streams, threads and their ops
//   [SECTION] Entry point
#include "replay/replay_program.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <unordered_set>

#include "core/error.hpp"
#include "replay/collective_info.hpp"
#include "replay/gemm_shapes.hpp"
#include "replay/record_fields.hpp"
#include "replay/replay_edges.hpp"

namespace csim::replay {
namespace {

using core::Op;
using core::OpId;
using core::OpKind;

// [SECTION] RankBuilder --------------------------------------------------------------------------

SyncKind sync_kind(const std::string& n) {
  auto has = [&](const char* w) { return n.find(w) != std::string::npos; };
  if (has("DeviceSynchronize") || has("CtxSynchronize")) return SyncKind::kDeviceSync;
  if (has("StreamSynchronize")) return SyncKind::kStreamSync;
  if (has("EventSynchronize")) return SyncKind::kEventSync;
  if (has("StreamWaitEvent")) return SyncKind::kStreamWait;
  if (has("EventRecord")) return SyncKind::kEventRecord;
  return SyncKind::kOther;
}

class RankBuilder {
 public:
  RankBuilder(SortedTrace& s, int gpu, ReplayProgram& out, EdgeInputs& edges)
      : s_(s), gpu_(gpu), out_(out), p_(out.program), edges_(edges) {}

  ImportedRank build();

 private:
  using ThreadKey = std::pair<std::int64_t, std::int64_t>;
  enum class ItemKind { kStepEnd, kStepBegin, kOrphan, kRuntime, kMemory };
  struct Item {
    TimeNs t = 0;
    ItemKind kind = ItemKind::kRuntime;
    std::int64_t seq = 0;
    std::size_t rec = 0;  // record index, or step index for step items
  };

  void find_window();
  void make_streams();
  void match_launches();
  void build_thread(const ThreadKey& key, bool loop);
  OpId emit(Op op, const std::string& name);
  void emit_gpu_op(std::size_t rec, int thread, TimeNs launch_ts);
  void emit_gap(int thread, bool loop, const Coverage& cov, TimeNs c, TimeNs a);
  std::vector<const Record*> covering(const ThreadKey& key, TimeNs t) const;
  const Record* enclosing_gemm(const ThreadKey& key, TimeNs t) const;
  void emit_memory(int thread, const Record& r);
  void read_cuda_sync();
  void find_memory();

  SortedTrace& s_;
  int gpu_;
  ReplayProgram& out_;
  core::Program& p_;
  EdgeInputs& edges_;
  ImportedRank rank_;
  ThreadKey loop_{0, 0};
  std::vector<std::size_t> step_recs_;
  TimeNs w0_ = 0, w1_ = 0;
  std::map<ThreadKey, int> stream_of_;                             // (device, stream) -> id
  std::unordered_map<std::int64_t, std::size_t> runtime_of_corr_;  // correlation -> record
  std::vector<std::size_t> orphans_;  // GPU records without launch, first on their stream
  std::unordered_map<std::size_t, std::vector<std::size_t>> launched_;  // runtime -> GPU records
  std::unordered_map<std::size_t, std::vector<std::size_t>> attached_;  // ... issued after them
  std::unordered_map<std::size_t, OpId> op_of_rec_;                     // GPU record -> its op
  std::vector<std::size_t> unlaunched_;  // GPU records without a launch in the window
  int step_ = 1;
  std::pair<OpId, TimeNs> last_host_{core::kNoOp, 0};  // the thread's last HostWork, measured end
  std::unordered_set<const Record*> launching_comms_;  // CPU ops around a collective's launch
  std::unordered_map<std::size_t, std::size_t> sync_of_rec_;  // runtime record -> EdgeInputs::syncs
  std::int64_t memory_device_ = -1;                           // the device of the GPU records
  int memory_stream_ = -1;  // the stream [memory] events are replayed on (-1: none)
  bool memory_ok(const Record& r) const {
    return r.ts_ns >= w0_ && r.ts_ns < w1_ && r.device == memory_device_ && r.device_type != 0 &&
           r.bytes != 0 && r.bytes != -1;
  }

  void hold_unlaunched();
};

OpId RankBuilder::emit(Op op, const std::string& name) {
  op.id = static_cast<OpId>(p_.ops.size());
  op.gpu = gpu_;
  op.step = step_;
  op.name = p_.names.intern(name);
  p_.ops.push_back(std::move(op));
  return p_.ops.back().id;
}

void RankBuilder::find_window() {
  // The training loop's thread: the one holding the ProfilerStep#N annotations, else the one
  // making the most runtime calls (docs/replay.md, "Steps").
  std::map<ThreadKey, int> steps, calls;
  for (const auto& [key, idx] : s_.host) {
    for (std::size_t i : idx) {
      const Record& r = s_.records[i];
      if (r.name.rfind("ProfilerStep#", 0) == 0) ++steps[key];
      if (r.cat == Cat::kRuntime) ++calls[key];
    }
  }
  auto best = [](const std::map<ThreadKey, int>& m, ThreadKey* k) {
    int n = 0;
    for (const auto& [key, c] : m)
      if (c > n) n = c, *k = key;
    return n > 0;
  };
  if (best(steps, &loop_)) {
    std::vector<std::string> seen;
    for (std::size_t i : s_.host[loop_]) {
      const Record& r = s_.records[i];
      if (r.name.rfind("ProfilerStep#", 0) != 0) continue;
      if (std::find(seen.begin(), seen.end(), r.name) != seen.end()) continue;  // cpu_op twin
      seen.push_back(r.name);
      step_recs_.push_back(i);
    }
    rank_.stats.add(Stat::profiler_steps, static_cast<std::int64_t>(step_recs_.size()));
    w0_ = s_.records[step_recs_.front()].ts_ns;
    w1_ = w0_;
    for (std::size_t i : step_recs_) {
      const Record& r = s_.records[i];
      w1_ = std::max(w1_, r.ts_ns + r.dur_ns);
      rank_.steps.push_back({r.name, r.dur_ns, core::kNoOp, core::kNoOp});
    }
    return;
  }
  rank_.stats.add(Stat::no_steps);
  if (!best(calls, &loop_) && !s_.host.empty()) loop_ = s_.host.begin()->first;
  bool any = false;
  for (const Record& r : s_.records) {
    if (r.cat == Cat::kMemory) continue;
    w0_ = any ? std::min(w0_, r.ts_ns) : r.ts_ns;
    w1_ = any ? std::max(w1_, r.ts_ns + r.dur_ns) : r.ts_ns + r.dur_ns;
    any = true;
  }
  rank_.steps.push_back({"window", w1_ - w0_, core::kNoOp, core::kNoOp});
}

void RankBuilder::make_streams() {
  for (const auto& [key, idx] : s_.gpu) {
    bool comm = false, copies_only = true;
    for (std::size_t i : idx) {
      const Record& r = s_.records[i];
      comm |= r.cat == Cat::kKernel && is_collective_kernel(r.name);
      copies_only &= r.cat == Cat::kMemcpy;
    }
    core::StreamDesc sd;
    sd.id = static_cast<int>(p_.streams.size());
    sd.gpu = gpu_;
    sd.role = comm          ? core::StreamRole::kComm
              : copies_only ? core::StreamRole::kCopy
                            : core::StreamRole::kCompute;
    sd.name = "stream " + std::to_string(key.second);
    stream_of_[key] = sd.id;
    rank_.streams.push_back({sd.id, 0});
    p_.streams.push_back(std::move(sd));
  }
}

void RankBuilder::match_launches() {
  for (const auto& [key, idx] : s_.host)
    for (std::size_t i : idx)
      if (s_.records[i].cat == Cat::kRuntime && s_.records[i].correlation >= 0)
        runtime_of_corr_.emplace(s_.records[i].correlation, i);
  std::vector<TimeNs> latencies;
  for (const auto& [key, idx] : s_.gpu) {
    TimeNs prev_end = -1;
    // The launch call of the record before on this stream (none: the window's start). A record
    // without a launch in the window is issued right after it, so the stream keeps its order
    // (docs/replay.md, "Edges").
    std::int64_t anchor = -1;
    for (std::size_t i : idx) {
      Record& g = s_.records[i];
      const TimeNs end = g.ts_ns + g.dur_ns;
      auto it = g.correlation >= 0 ? runtime_of_corr_.find(g.correlation) : runtime_of_corr_.end();
      const bool in_window = it != runtime_of_corr_.end() && s_.records[it->second].ts_ns >= w0_ &&
                             s_.records[it->second].ts_ns < w1_;
      if (in_window) {
        const Record& r = s_.records[it->second];
        launched_[it->second].push_back(i);
        rank_.stats.add(Stat::launches_matched);
        if (prev_end < r.ts_ns && g.ts_ns >= r.ts_ns) latencies.push_back(g.ts_ns - r.ts_ns);
        anchor = static_cast<std::int64_t>(it->second);
      } else if (end > w0_ && g.ts_ns < w1_) {
        // Launched before the window (or its launch is missing) and running in it: what the GPU
        // was still doing when the window opened is kept, from the window's start.
        if (it != runtime_of_corr_.end()) {
          rank_.stats.add(Stat::carried_over);
        } else {
          rank_.stats.add(Stat::no_launch);
        }
        if (g.ts_ns < w0_) {
          g.dur_ns = end - w0_;
          g.ts_ns = w0_;
        }
        unlaunched_.push_back(i);
        if (anchor >= 0) {
          attached_[static_cast<std::size_t>(anchor)].push_back(i);
        } else {
          orphans_.push_back(i);
        }
      } else {
        rank_.stats.add(Stat::outside_window);
      }
      prev_end = std::max(prev_end, end);
    }
  }
  for (auto& [rt, recs] : launched_) {
    std::sort(recs.begin(), recs.end());  // records are in time order: index order is time order
    if (recs.size() > 1)
      rank_.stats.add(Stat::graph_launch_kernels, static_cast<std::int64_t>(recs.size()));
  }
  for (auto& [rt, recs] : attached_) {
    std::vector<std::size_t>& l = launched_[rt];
    l.insert(l.end(), recs.begin(), recs.end());
  }
  // The launch latency the host model adds (host.launch_latency_us): the median delay from a
  // launch call's start to its kernel's start on a stream that was idle (docs/replay.md, "Host
  // time").
  rank_.launch_latency_ns = 4000;
  if (!latencies.empty()) {
    const std::size_t mid = (latencies.size() - 1) / 2;  // the lower median
    std::nth_element(latencies.begin(), latencies.begin() + static_cast<std::ptrdiff_t>(mid),
                     latencies.end());
    rank_.launch_latency_ns = std::min<TimeNs>(latencies[mid], 50000);
  }
}

// The CPU ops (cpu_op, user_annotation) covering t on the thread, innermost first, among the 512
// host records before t (a collective's nccl:/c10d:: ops, a gradient hook, a wait around it).
std::vector<const Record*> RankBuilder::covering(const ThreadKey& key, TimeNs t) const {
  std::vector<const Record*> out;
  auto it = s_.host.find(key);
  if (it == s_.host.end()) return out;
  const std::vector<std::size_t>& v = it->second;
  auto pos = std::upper_bound(v.begin(), v.end(), t,
                              [&](TimeNs x, std::size_t i) { return x < s_.records[i].ts_ns; });
  for (int n = 0; pos != v.begin() && n < 512; ++n) {
    const Record& r = s_.records[*--pos];
    if ((r.cat == Cat::kCpuOp || r.cat == Cat::kAnnotation) && r.ts_ns + r.dur_ns >= t)
      out.push_back(&r);
  }
  return out;
}

// The innermost GEMM CPU op (aten::mm, addmm, bmm, baddbmm, linear) around t on the thread: the
// latest one starting at or before t that still covers it, among the 256 host records before t.
const Record* RankBuilder::enclosing_gemm(const ThreadKey& key, TimeNs t) const {
  auto it = s_.host.find(key);
  if (it == s_.host.end()) return nullptr;
  const std::vector<std::size_t>& v = it->second;
  auto pos = std::upper_bound(v.begin(), v.end(), t,
                              [&](TimeNs x, std::size_t i) { return x < s_.records[i].ts_ns; });
  for (int n = 0; pos != v.begin() && n < 256; ++n) {
    const Record& r = s_.records[*--pos];
    if (r.cat == Cat::kCpuOp && r.ts_ns + r.dur_ns >= t && is_gemm_op(r.name)) return &r;
  }
  return nullptr;
}

void RankBuilder::emit_gpu_op(std::size_t rec, int thread, TimeNs launch_ts) {
  const Record& g = s_.records[rec];
  const std::int64_t dev = g.device >= 0 ? g.device : g.pid;
  const std::int64_t stream = g.stream >= 0 ? g.stream : g.tid;
  GpuOpInfo info;
  info.measured_ns = g.dur_ns;
  info.cls = classify_kernel(g.cat, g.name, g.dur_ns, &info.tensor_core, &info.tf32);
  Op op;
  op.thread = thread;
  op.stream = stream_of_.at({dev, stream});
  op.fixed_ns = g.dur_ns;
  op.bytes = std::max<std::int64_t>(g.bytes, 0);
  op.dtype = info.tensor_core ? core::Dtype::kBf16 : core::Dtype::kFp32;
  if (g.cat == Cat::kMemcpy) {
    op.kind = OpKind::kCopy;
    op.copy_kind = copy_kind(g.name);
  } else if (info.cls == KernelClass::kCollective) {
    op.kind = OpKind::kCollective;
    rank_.stats.add(Stat::collectives);
    std::vector<const Record*> around;
    auto rt = runtime_of_corr_.find(g.correlation);
    if (rt != runtime_of_corr_.end()) {
      const Record& r = s_.records[rt->second];
      around = covering({r.pid, r.tid}, r.ts_ns);
    }
    const CollectiveInfo ci = collective_info(around, g.name, s_.meta.world_size);
    op.collective = ci.kind;
    for (const Record* r : around) {
      info.grad_hook |= r->name.find("AccumulateGrad") != std::string::npos ||
                        r->name.find("post_backward") != std::string::npos ||
                        r->name.find("reduce_grad") != std::string::npos;
    }
    if (ci.bytes > 0) {
      op.dtype = ci.dtype;
      op.bytes = ci.bytes;
      rank_.stats.add(ci.size_source == SizeSource::kRecordParamComms
                          ? Stat::collectives_sized
                          : Stat::collectives_size_inferred);
      info.size_inferred = ci.size_source == SizeSource::kInputDims;
      info.group_size = ci.group_size;
      info.group_ranks = ci.ranks;
      info.group_key = ci.group_key;
      if (ci.group_source == GroupSource::kWorld) rank_.stats.add(Stat::collectives_group_world);
      if (!ci.ranks.empty()) rank_.stats.add(Stat::collectives_group_read);
      if (info.group_size < 1) rank_.stats.add(Stat::collectives_no_group);
    } else {
      rank_.stats.add(Stat::collectives_unsized);
    }
  } else {
    op.kind = OpKind::kCompute;
    op.compute_kind =
        info.cls == KernelClass::kGemm ? core::ComputeKind::kGemm : core::ComputeKind::kElementwise;
    auto rt = g.correlation >= 0 ? runtime_of_corr_.find(g.correlation) : runtime_of_corr_.end();
    if (info.cls == KernelClass::kGemm && rt != runtime_of_corr_.end()) {
      const Record& r = s_.records[rt->second];
      const Record* mm = enclosing_gemm({r.pid, r.tid}, r.ts_ns);
      if (mm != nullptr && gemm_shape_of(mm->name, mm->input_dims, &info.shape)) {
        op.gemm = info.shape;
        const core::GemmShape& s = info.shape;
        op.flops = 2.0 * static_cast<double>(s.batch) * static_cast<double>(s.m) *
                   static_cast<double>(s.n) * static_cast<double>(s.k);
        rank_.stats.add(Stat::gemm_shapes);
      }
    }
  }
  info.op = emit(std::move(op), g.name);
  rank_.streams[static_cast<std::size_t>(p_.ops.back().stream - rank_.streams.front().stream)]
      .measured_busy_ns += g.dur_ns;
  edges_.gpu_ops.push_back({info.op, gpu_, p_.ops.back().stream, thread, launch_ts, g.ts_ns,
                            g.ts_ns + g.dur_ns,
                            p_.ops.back().kind == OpKind::kCompute && g.cat == Cat::kKernel,
                            p_.ops.back().kind == OpKind::kCollective});
  op_of_rec_[rec] = info.op;
  out_.gpu_ops.push_back(info);
}

void RankBuilder::emit_gap(int thread, bool loop, const Coverage& cov, TimeNs c, TimeNs a) {
  if (a <= c) return;
  const TimeNs covered = cov.covered(c, a);
  Op op;
  op.kind = OpKind::kHostWork;
  op.thread = thread;
  // The loop thread's time outside any CPU op is Python (the GIL held); inside one, ATen.
  // Other threads (autograd, data loading) run C++ only.
  op.python_ns = loop ? a - c - covered : 0;
  op.dispatch_ns = loop ? covered : a - c;
  const OpId id = emit(std::move(op), loop ? "host (python + aten)" : "host");
  last_host_ = {id, a};
  edges_.host_ops.push_back({id, gpu_, thread, c, a, a - c - covered, true, loop});
}

void RankBuilder::build_thread(const ThreadKey& key, bool loop) {
  core::ThreadDesc td;
  td.id = static_cast<int>(p_.threads.size());
  td.process = gpu_;
  td.gpu = gpu_;
  td.name = (loop ? "main " : "thread ") + std::to_string(key.second);
  p_.threads.push_back(td);
  const int thread = td.id;
  Coverage cov;
  std::vector<Item> items;
  for (std::size_t i : s_.host[key]) {
    const Record& r = s_.records[i];
    if (r.cat == Cat::kCpuOp) cov.add(r.ts_ns, r.ts_ns + r.dur_ns);
    if (r.name.rfind("Optimizer.step#", 0) == 0 && r.ts_ns >= w0_ && r.ts_ns < w1_)
      edges_.optimizer_steps.push_back({gpu_, thread, r.ts_ns, r.ts_ns + r.dur_ns});
    if (r.cat != Cat::kRuntime) continue;
    if (r.ts_ns < w0_ || r.ts_ns >= w1_) {
      rank_.stats.add(Stat::outside_window);
      continue;
    }
    items.push_back({r.ts_ns, ItemKind::kRuntime, r.seq, i});
  }
  cov.finish();
  if (memory_stream_ >= 0) {
    for (std::size_t i : s_.memory) {
      const Record& r = s_.records[i];
      if (r.pid == key.first && r.tid == key.second && memory_ok(r))
        items.push_back({r.ts_ns, ItemKind::kMemory, r.seq, i});
    }
  }
  if (loop) {
    for (std::size_t k = 0; k < step_recs_.size(); ++k) {
      const Record& r = s_.records[step_recs_[k]];
      items.push_back({r.ts_ns, ItemKind::kStepBegin, r.seq, k});
      items.push_back({r.ts_ns + r.dur_ns, ItemKind::kStepEnd, r.seq, k});
    }
    if (step_recs_.empty()) {
      items.push_back({w0_, ItemKind::kStepBegin, -1, 0});
      items.push_back({w1_, ItemKind::kStepEnd, -1, 0});
    }
    // Records without a launch in the window that are the first of their stream: issued at the
    // window's start (they were queued when it opened), in start order.
    for (std::size_t i : orphans_)
      items.push_back({w0_, ItemKind::kOrphan, static_cast<std::int64_t>(i), i});
  }
  // At one time: a step's end before the next one's begin, then calls in file order.
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    if (x.t != y.t) return x.t < y.t;
    if (x.kind != y.kind) return static_cast<int>(x.kind) < static_cast<int>(y.kind);
    return x.seq < y.seq;
  });
  if (items.empty()) {
    p_.threads.pop_back();
    return;
  }
  step_ = 1;
  last_host_ = {core::kNoOp, 0};
  TimeNs cursor = w0_;
  if (loop && memory_stream_ >= 0 && rank_.resident_bytes > 0) {
    // What the GPU held when the window opened (docs/replay.md, "Memory").
    Op op;
    op.kind = OpKind::kAlloc;
    op.thread = thread;
    op.stream = memory_stream_;
    op.bytes = rank_.resident_bytes;
    op.mem_category = core::MemCategory::kParams;
    op.phase = core::Phase::kMemory;
    emit(std::move(op), "allocated before the window");
  }
  std::vector<std::size_t> open_waits;  // cudaStreamWaitEvent calls before the next launch
  for (const Item& it : items) {
    if (it.kind != ItemKind::kStepEnd) {
      emit_gap(thread, loop, cov, cursor, it.t);
      cursor = std::max(cursor, it.t);
    } else {
      emit_gap(thread, loop, cov, cursor, it.t);  // the step's tail
      cursor = std::max(cursor, it.t);
    }
    switch (it.kind) {
      case ItemKind::kStepBegin: {
        step_ = static_cast<int>(it.rec) + 1;
        Op op;
        op.kind = OpKind::kMarker;
        op.thread = thread;
        rank_.steps[it.rec].begin = emit(std::move(op), rank_.steps[it.rec].name);
        break;
      }
      case ItemKind::kStepEnd: {
        Op op;
        op.kind = OpKind::kMarker;
        op.thread = thread;
        rank_.steps[it.rec].end = emit(std::move(op), rank_.steps[it.rec].name + " end");
        break;
      }
      case ItemKind::kOrphan:
        emit_gpu_op(it.rec, thread, s_.records[it.rec].ts_ns);
        break;
      case ItemKind::kMemory:
        emit_memory(thread, s_.records[it.rec]);
        break;
      case ItemKind::kRuntime: {
        const Record& r = s_.records[it.rec];
        auto l = launched_.find(it.rec);
        // The GPU ops first: the sim enqueues an op when it is issued, the call's time follows.
        const std::size_t first = edges_.gpu_ops.size();
        if (l != launched_.end())
          for (std::size_t g : l->second) emit_gpu_op(g, thread, r.ts_ns);
        Op op;
        op.kind = OpKind::kHostWork;
        op.thread = thread;
        op.dispatch_ns = r.dur_ns;
        const OpId id = emit(std::move(op), r.name);
        edges_.host_ops.push_back({id, gpu_, thread, r.ts_ns, r.ts_ns + r.dur_ns, 0, false, false});
        // A hold is measured from the host op before the launch (the GPU ops are issued before
        // the call's own HostWork, which may wait for them: replay_edges.hpp, "hold").
        for (std::size_t g = first; g < edges_.gpu_ops.size(); ++g) {
          edges_.gpu_ops[g].launch_op = last_host_.first;
          edges_.gpu_ops[g].launch_end_ns = last_host_.second;
          edges_.gpu_ops[g].call_op = id;
          edges_.gpu_ops[g].call_end_ns = r.ts_ns + r.dur_ns;
        }
        last_host_ = {id, r.ts_ns + r.dur_ns};
        if (edges_.gpu_ops.size() > first) {
          for (std::size_t w : open_waits) edges_.syncs[w].next_gpu_op = first;
          open_waits.clear();
        }
        SyncCall sc;
        sc.op = id;
        sc.gpu = gpu_;
        sc.thread = thread;
        sc.start_ns = r.ts_ns;
        sc.end_ns = r.ts_ns + r.dur_ns;
        sc.own_begin = first;
        sc.own_end = edges_.gpu_ops.size();
        sc.synchronize = is_sync_call(r.name);
        sc.kind = sync_kind(r.name);
        if (sc.kind == SyncKind::kStreamWait) {
          // A wait for a collective unless it belongs to one's launch (docs/replay.md, "Edges").
          bool comm_side = false;
          for (const Record* x : covering(key, r.ts_ns))
            comm_side |= is_comm_op(*x) &&
                         (x->name != "record_param_comms" || launching_comms_.count(x) > 0);
          sc.wait = !comm_side;
          if (sc.wait) open_waits.push_back(edges_.syncs.size());
        }
        sync_of_rec_[it.rec] = edges_.syncs.size();
        edges_.syncs.push_back(sc);
        cursor = std::max(cursor, r.ts_ns + r.dur_ns);
        break;
      }
    }
  }
}

// A [memory] event: an allocation (Bytes > 0) or a free on the rank's memory stream, issued by the
// thread that recorded it at its time (docs/replay.md, "Memory").
void RankBuilder::emit_memory(int thread, const Record& r) {
  Op op;
  op.kind = r.bytes > 0 ? OpKind::kAlloc : OpKind::kFree;
  op.thread = thread;
  op.stream = memory_stream_;
  op.bytes = r.bytes > 0 ? r.bytes : -r.bytes;
  op.mem_category = core::MemCategory::kActivations;
  op.phase = core::Phase::kMemory;
  emit(std::move(op), "[memory]");
  rank_.stats.add(Stat::memory_replayed);
}

// The device of the trace's GPU records, the compute stream with the most of them (the caching
// allocator's stream), and from the [memory] events of that device in the window the measured
// peak and what was allocated before the window.
void RankBuilder::find_memory() {
  if (s_.memory.empty()) return;
  std::map<std::int64_t, std::size_t> per_device;
  std::size_t most = 0;
  for (const auto& [key, idx] : s_.gpu) {
    per_device[key.first] += idx.size();
    const int id = stream_of_.at(key);
    if (p_.streams[static_cast<std::size_t>(id)].role == core::StreamRole::kCompute &&
        idx.size() > most)
      most = idx.size(), memory_stream_ = id;
  }
  for (const auto& [dev, n] : per_device)
    if (memory_device_ < 0 || n > per_device[memory_device_]) memory_device_ = dev;
  bool first = true;
  for (std::size_t i : s_.memory) {
    const Record& r = s_.records[i];
    if (!memory_ok(r)) {
      if (r.ts_ns >= w0_ && r.ts_ns < w1_) rank_.stats.add(Stat::memory_other_device);
      continue;
    }
    if (r.total_allocated < 0) continue;
    if (first) rank_.resident_bytes = std::max<Bytes>(0, r.total_allocated - r.bytes);
    first = false;
    rank_.measured_peak_bytes = std::max(rank_.measured_peak_bytes, r.total_allocated);
  }
  if (memory_stream_ < 0) rank_.measured_peak_bytes = -1;
}

// cuda_sync records (docs/replay.md, "Edges", read): each names its runtime call by correlation;
// its stream and, for event waits, the cudaEventRecord call and the stream it recorded on.
void RankBuilder::read_cuda_sync() {
  auto stream_id = [&](std::int64_t dev, std::int64_t stream) {
    auto it = stream_of_.find({dev, stream});
    return it == stream_of_.end() ? -1 : it->second;
  };
  for (std::size_t i : s_.sync) {
    const Record& y = s_.records[i];
    auto rt = runtime_of_corr_.find(y.correlation);
    if (rt == runtime_of_corr_.end()) continue;
    auto sc_it = sync_of_rec_.find(rt->second);
    if (sc_it == sync_of_rec_.end()) continue;
    SyncCall& sc = edges_.syncs[sc_it->second];
    const std::int64_t dev = y.device >= 0 ? y.device : y.pid;
    const std::int64_t stream = y.stream >= 0 ? y.stream : y.tid;
    const SyncKind k = y.name == "Stream Wait Event" ? SyncKind::kStreamWait
                       : y.name == "Event Sync"      ? SyncKind::kEventSync
                       : y.name == "Stream Sync"     ? SyncKind::kStreamSync
                       : y.name == "Context Sync"    ? SyncKind::kDeviceSync
                                                     : SyncKind::kOther;
    if (k == SyncKind::kOther) continue;
    sc.kind = k;
    sc.read = true;
    sc.sync_stream = stream_id(dev, stream);
    if (y.wait_on_stream >= 0) sc.record_stream = stream_id(dev, y.wait_on_stream);
    auto rec = runtime_of_corr_.find(y.wait_record_corr);
    if (y.wait_record_corr >= 0 && rec != runtime_of_corr_.end())
      sc.record_ns = s_.records[rec->second].ts_ns;
    if (sc.record_ns < 0) sc.record_stream = -1;
  }
}

// A GPU record without a launch in the window is issued after the one before it on its stream (or
// at the window's start), which keeps the stream's order but not its start: what it waited for
// before the window is unknown, so it is held to its measured start (replay_edges.hpp, "holds").
void RankBuilder::hold_unlaunched() {
  for (std::size_t i : unlaunched_)
    edges_.holds.push_back({op_of_rec_.at(i), gpu_, s_.records[i].ts_ns - rank_.launch_latency_ns});
}

ImportedRank RankBuilder::build() {
  rank_.meta = s_.meta;
  rank_.gpu = gpu_;
  rank_.stats = s_.stats;
  find_window();
  rank_.window_start_ns = w0_;
  make_streams();
  match_launches();
  find_memory();
  // The CPU ops around each collective's launch: a cudaStreamWaitEvent inside them is part of
  // the launch, not a wait for a collective.
  for (const auto& [rt, recs] : launched_) {
    const Record& r = s_.records[rt];
    for (std::size_t g : recs)
      if (s_.records[g].cat == Cat::kKernel && is_collective_kernel(s_.records[g].name))
        for (const Record* x : covering({r.pid, r.tid}, r.ts_ns))
          if (x->name == "record_param_comms") launching_comms_.insert(x);
  }
  bool waits = !s_.sync.empty();
  for (const Record& r : s_.records)
    waits |= r.cat == Cat::kRuntime && r.name.find("StreamWaitEvent") != std::string::npos;
  if (edges_.records_waits.size() <= static_cast<std::size_t>(gpu_))
    edges_.records_waits.resize(static_cast<std::size_t>(gpu_) + 1, 0);
  edges_.records_waits[static_cast<std::size_t>(gpu_)] = waits ? 1 : 0;
  core::ProcessDesc pd;
  pd.id = gpu_;
  pd.node = 0;
  pd.name =
      "rank " + std::to_string(s_.meta.rank >= 0 ? s_.meta.rank : gpu_) + " (" + s_.meta.file + ")";
  p_.processes.push_back(pd);
  build_thread(loop_, true);
  for (const auto& [key, idx] : s_.host)
    if (key != loop_) build_thread(key, false);
  read_cuda_sync();
  hold_unlaunched();
  p_.steps = std::max(p_.steps, static_cast<int>(rank_.steps.size()));
  return std::move(rank_);
}

}  // namespace

// [SECTION] Entry point --------------------------------------------------------------------------

ReplayProgram build_replay_program(std::vector<SortedTrace> traces, bool hold_unexplained) {
  ReplayProgram out;
  core::Program& p = out.program;
  p.strategy_label =
      "replay (" + std::to_string(traces.size()) + " trace" + (traces.size() == 1 ? "" : "s") + ")";
  EdgeInputs edges;
  for (std::size_t r = 0; r < traces.size(); ++r) {
    const std::size_t ops_before = p.ops.size();
    RankBuilder b(traces[r], static_cast<int>(r), out, edges);
    ImportedRank rank = b.build();
    bool gpu_work = false;
    for (std::size_t i = ops_before; i < p.ops.size(); ++i)
      gpu_work |= p.ops[i].stream >= 0 || p.ops[i].kind == OpKind::kHostWork;
    if (!gpu_work)
      throw InputError(traces[r].meta.file, "traceEvents",
                       "nothing to replay: no CPU op, runtime call or GPU record in the window",
                       "record with torch.profiler activities=[CPU, CUDA] around a few steps");
    p.active_gpus.push_back(static_cast<int>(r));
    out.ranks.push_back(std::move(rank));
  }
  p.world_gpus = static_cast<int>(traces.size());
  p.gpus_per_node = p.world_gpus;
  infer_edges(p, edges, out, hold_unexplained);
  for (const ImportedRank& r : out.ranks) out.stats.merge(r.stats);
  return out;
}

}  // namespace csim::replay
