// Stage 3: sorted traces -> Program (docs/replay.md, "Stages", "Host time", "Edges").
//
// Index
//   [SECTION] RankBuilder     one trace: window, streams, threads and their ops
//   [SECTION] Entry point
#include "replay/replay_program.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.hpp"
#include "replay/gemm_shapes.hpp"
#include "replay/record_fields.hpp"
#include "replay/replay_edges.hpp"

namespace csim::replay {
namespace {

using core::Op;
using core::OpId;
using core::OpKind;

// [SECTION] RankBuilder --------------------------------------------------------------------------

class RankBuilder {
 public:
  RankBuilder(SortedTrace& s, int gpu, ReplayProgram& out, EdgeInputs& edges)
      : s_(s), gpu_(gpu), out_(out), p_(out.program), edges_(edges) {}

  ImportedRank build();

 private:
  using ThreadKey = std::pair<std::int64_t, std::int64_t>;
  enum class ItemKind { kStepEnd, kStepBegin, kOrphan, kRuntime };
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
  const Record* enclosing_comms(const ThreadKey& key, TimeNs t) const;
  const Record* enclosing_gemm(const ThreadKey& key, TimeNs t) const;

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

const Record* RankBuilder::enclosing_comms(const ThreadKey& key, TimeNs t) const {
  auto it = s_.host.find(key);
  if (it == s_.host.end()) return nullptr;
  const Record* best = nullptr;
  // The innermost record_param_comms around t: the latest one starting at or before t that still
  // covers it (CPU ops on one thread nest, so the latest start is the innermost).
  for (std::size_t i : it->second) {
    const Record& r = s_.records[i];
    if (r.ts_ns > t) break;
    if (r.name == "record_param_comms" && r.ts_ns + r.dur_ns >= t) best = &r;
  }
  return best;
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
    const Record* rpc = nullptr;
    auto rt = runtime_of_corr_.find(g.correlation);
    if (rt != runtime_of_corr_.end()) {
      const Record& r = s_.records[rt->second];
      rpc = enclosing_comms({r.pid, r.tid}, r.ts_ns);
    }
    op.collective = collective_kind(rpc ? rpc->collective_name : "", g.name);
    if (rpc != nullptr && rpc->in_nelems >= 0) {
      op.dtype = dtype_of(rpc->dtype);
      op.bytes = std::max(rpc->in_nelems, rpc->out_nelems) * dtype_bytes(rpc->dtype);
      rank_.stats.add(Stat::collectives_sized);
      info.group_size = static_cast<int>(rpc->group_size);
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
                            p_.ops.back().kind == OpKind::kCompute && g.cat == Cat::kKernel});
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
    if (r.cat != Cat::kRuntime) continue;
    if (r.ts_ns < w0_ || r.ts_ns >= w1_) {
      rank_.stats.add(Stat::outside_window);
      continue;
    }
    items.push_back({r.ts_ns, ItemKind::kRuntime, r.seq, i});
  }
  cov.finish();
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
        }
        last_host_ = {id, r.ts_ns + r.dur_ns};
        edges_.syncs.push_back({id, gpu_, r.ts_ns, r.ts_ns + r.dur_ns, first, edges_.gpu_ops.size(),
                                is_sync_call(r.name)});
        cursor = std::max(cursor, r.ts_ns + r.dur_ns);
        break;
      }
    }
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
  core::ProcessDesc pd;
  pd.id = gpu_;
  pd.node = 0;
  pd.name =
      "rank " + std::to_string(s_.meta.rank >= 0 ? s_.meta.rank : gpu_) + " (" + s_.meta.file + ")";
  p_.processes.push_back(pd);
  build_thread(loop_, true);
  for (const auto& [key, idx] : s_.host)
    if (key != loop_) build_thread(key, false);
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
