// docs/block-eval.md, "Chains" and "Scope": one pass over the ops.
#include "backends/block/schedule.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace csim::block::detail {

// [SECTION] Units --------------------------------------------------------------------------------

int Schedule::target(OpId op) {
  int& k = target_of_op_[static_cast<std::size_t>(op)];
  if (k < 0) {
    k = static_cast<int>(target_end_.size());
    target_end_.push_back(-1);
  }
  return k;
}

// Others wait for `op`: it must end its unit, so that its end is an event. Splits the chain that
// holds it when it is not the chain's last op (docs/block-eval.md, "Chains").
void Schedule::end_unit_at(OpId op, std::vector<int>& open) {
  const Op& o = program_.ops[static_cast<std::size_t>(op)];
  if (o.stream < 0) return;
  StreamSlots& st = streams_[static_cast<std::size_t>(o.stream)];
  if (!st.op.empty() && st.op.back() == op) {  // the common case: the stream's latest op
    int& cur = open[static_cast<std::size_t>(o.stream)];
    if (cur == st.units.back()) cur = -1;
    return;
  }
  const int slot =
      static_cast<int>(std::lower_bound(st.op.begin(), st.op.end(), op) - st.op.begin());
  auto ui = std::upper_bound(st.units.begin(), st.units.end(), slot, [&](int sl, int u) {
    return sl < units_[static_cast<std::size_t>(u)].first;
  });
  CSIM_ASSERT(ui != st.units.begin());
  --ui;
  const int u = *ui;
  int& cur = open[static_cast<std::size_t>(o.stream)];
  if (units_[static_cast<std::size_t>(u)].end == slot + 1) {
    if (cur == u) cur = -1;  // nothing may follow it in its unit
    return;
  }
  Unit rest = units_[static_cast<std::size_t>(u)];
  rest.first = slot + 1;
  rest.wait_first = rest.wait_end;  // only a unit's first op waits
  units_[static_cast<std::size_t>(u)].end = slot + 1;
  // The host slack of each part, from its own slots.
  for (Unit* part : {&units_[static_cast<std::size_t>(u)], &rest}) {
    part->host_slack = 0;
    for (int j = part->first; j < part->end; ++j) {
      const std::size_t k = static_cast<std::size_t>(j), f = static_cast<std::size_t>(part->first);
      part->host_slack =
          std::max(part->host_slack, st.er[k] - (st.pc[k] + st.pm[k] - st.pc[f] - st.pm[f]));
    }
  }
  const int id = static_cast<int>(units_.size());
  const std::size_t pos = static_cast<std::size_t>(ui - st.units.begin());
  units_.push_back(rest);
  ++chains_;
  st.units.insert(st.units.begin() + static_cast<std::ptrdiff_t>(pos + 1), id);
  if (cur == u) cur = id;
}

std::string Schedule::build() {
  steps_ = std::max(1, program_.steps);
  if (shared_ != nullptr) {  // TransferTable: the same topology and mirrors, or not shared
    if (!shared_->filled) {
      shared_->filled = true;
      shared_->topology = topology_.get();
      shared_->images = program_.symmetry.images;
    } else if (shared_->topology != topology_.get() ||
               shared_->images != program_.symmetry.images) {
      shared_ = nullptr;
    }
  }
  if (program_.threads.empty()) return "no host threads";
  const std::size_t gpus = static_cast<std::size_t>(program_.world_gpus);
  // One thread per process (no GIL waits) and per GPU.
  std::vector<int> per_process(program_.processes.size(), 0), per_gpu(gpus, 0);
  std::vector<int> per_node(static_cast<std::size_t>(scenario_.cluster.nodes), 0);
  threads_.resize(program_.threads.size());
  for (const core::ThreadDesc& t : program_.threads) {
    if (t.gpu < 0 || t.gpu >= program_.world_gpus) return "a host thread without a GPU";
    if (++per_process[static_cast<std::size_t>(t.process)] > 1)
      return "a process with several threads (GIL, data-loader workers)";
    if (++per_gpu[static_cast<std::size_t>(t.gpu)] > 1) return "a GPU driven by several threads";
    ++per_node[static_cast<std::size_t>(
        program_.processes[static_cast<std::size_t>(t.process)].node)];
    threads_[static_cast<std::size_t>(t.id)].gpu = t.gpu;
  }
  // Enough CPU cores that no thread waits for one (the op-level share under rank symmetry:
  // cores x simulated / active GPUs of the node, backends/sim/sim_executor.cpp).
  std::vector<int> active(per_node.size(), 0), simulated(per_node.size(), 0);
  for (int g : program_.active_gpus) {
    ++active[static_cast<std::size_t>(g / scenario_.cluster.gpus_per_node)];
    if (!program_.symmetry.enabled() ||
        program_.symmetry.weight_of_gpu[static_cast<std::size_t>(g)] > 0)
      ++simulated[static_cast<std::size_t>(g / scenario_.cluster.gpus_per_node)];
  }
  for (std::size_t nd = 0; nd < per_node.size(); ++nd) {
    int cores = std::max(1, scenario_.host.cpu_cores);
    if (program_.symmetry.enabled() && active[nd] > 0 && simulated[nd] > 0)
      cores = std::max(1, static_cast<int>(static_cast<std::int64_t>(scenario_.host.cpu_cores) *
                                           simulated[nd] / active[nd]));
    if (per_node[nd] > cores) return "more threads than CPU cores on a node";
  }
  streams_.resize(program_.streams.size());
  streams_of_gpu_.assign(gpus, {});
  compute_stream_of_gpu_.assign(gpus, -1);
  for (const core::StreamDesc& sd : program_.streams) {
    streams_[static_cast<std::size_t>(sd.id)].gpu = sd.gpu;
    streams_of_gpu_[static_cast<std::size_t>(sd.gpu)].push_back(sd.id);
    if (sd.role != core::StreamRole::kCompute) continue;
    if (compute_stream_of_gpu_[static_cast<std::size_t>(sd.gpu)] >= 0)
      return "several compute streams on a GPU";
    compute_stream_of_gpu_[static_cast<std::size_t>(sd.gpu)] = sd.id;
  }
  // A collective instance holds one op per member that issues ops (docs/program.md, "Rank
  // symmetry": the representatives).
  group_members_.assign(program_.groups.size(), 0);
  for (const core::CommGroup& g : program_.groups)
    for (int gpu : g.gpus)
      group_members_[static_cast<std::size_t>(g.id)] +=
          !program_.symmetry.enabled() ||
          program_.symmetry.weight_of_gpu[static_cast<std::size_t>(gpu)] > 0;
  plan_backpressure();  // docs/block-eval.md, "Allocation backpressure"
  target_of_op_.assign(program_.ops.size(), -1);
  communicates_.assign(gpus, 0);
  const core::GpuSpec& gpu = scenario_.cluster.gpu;
  const TimeNs latency = us_to_ns(scenario_.host.launch_latency_us);
  std::vector<int> open(program_.streams.size(), -1);  // open chain per stream
  bool any_compute = false;
  const Op* const ops_end = program_.ops.data() + program_.ops.size();
  for (const Op& op : program_.ops) {
    // The pass is bound by reading the ops (200 bytes each): ask for the lines a few ops ahead.
    constexpr std::ptrdiff_t kAhead = 16;
    if (ops_end - &op > kAhead) {
      const char* next = reinterpret_cast<const char*>(&op + kAhead);
      __builtin_prefetch(next);
      __builtin_prefetch(next + 64);
      __builtin_prefetch(next + 128);
    }
    ThreadState& th = threads_[static_cast<std::size_t>(op.thread)];
    if (op.gpu != th.gpu) return "a thread issuing for another GPU";
    // An allocation checked for backpressure heads a segment too (block_backpressure.cpp).
    const int check =
        bp_check_of_op_.empty() ? -1 : bp_check_of_op_[static_cast<std::size_t>(op.id)];
    bool host_wait = th.segs.empty() || check >= 0;
    for (const core::Dep& d : op.deps) host_wait = host_wait || d.kind == core::DepKind::kHostWaits;
    if (host_wait) {  // a new host segment; no chain crosses it (docs/block-eval.md, "Host")
      th.segs.push_back(
          {op.id, static_cast<int>(waits_.size()), static_cast<int>(waits_.size()), 0, -1, check});
      th.cum = 0;
      for (int s : streams_of_gpu_[static_cast<std::size_t>(th.gpu)])
        open[static_cast<std::size_t>(s)] = -1;
    }
    // The head's host waits, then (below, for a stream op) its stream waits, kept per unit.
    for (const core::Dep& d : op.deps) {
      if (d.kind != core::DepKind::kHostWaits) continue;
      const int k = target(d.op);
      waiters_.push_back({k, -1 - op.thread});
      waits_.push_back(k);
      end_unit_at(d.op, open);
    }
    if (host_wait) th.segs.back().wait_end = static_cast<int>(waits_.size());
    const int stream_waits = static_cast<int>(waits_.size());
    for (const core::Dep& d : op.deps) {
      if (d.kind != core::DepKind::kStreamWaits || op.stream < 0) continue;
      const int k = target(d.op);
      waiters_.push_back({k, op.stream});
      waits_.push_back(k);
      end_unit_at(d.op, open);
    }
    const int seg = static_cast<int>(th.segs.size()) - 1;
    if (op.step >= 1 && op.step != th.last_step) {
      if (op.step < th.last_step || op.step > steps_) return "steps out of order";
      th.last_step = op.step;
      th.drawn = false;
      th.marks.push_back({op.step, seg, th.cum, false});
    }
    if (op.step >= 1 && !th.drawn && op.kind != OpKind::kAlloc && op.kind != OpKind::kFree &&
        op.kind != OpKind::kMarker) {
      th.drawn = true;
      th.marks.push_back({op.step, seg, th.cum, true});
    }
    th.cum += op.python_ns + op.dispatch_ns;
    th.segs.back().cum_end = th.cum;
    if (op.stream < 0) {
      th.host_ops.push_back({seg, th.cum, op.id, op.step});
      continue;
    }
    StreamSlots& st = streams_[static_cast<std::size_t>(op.stream)];
    if (st.gpu != op.gpu) return "an op on another GPU's stream";
    const bool compute_stream =
        op.stream == compute_stream_of_gpu_[static_cast<std::size_t>(op.gpu)];
    if (st.thread < 0) {
      st.thread = op.thread;
      if (compute_stream) {  // most of a thread's ops: reserve once rather than grow
        const std::size_t guess = program_.ops.size() / program_.threads.size() + 16;
        st.op.reserve(guess);
        st.er.reserve(guess);
        st.pc.reserve(guess + 1);
        st.pm.reserve(guess + 1);
        st.hbm.reserve(guess);
      }
    }
    if (st.thread != op.thread) return "a stream fed by several threads";
    TimeNs dc = 0, dm = 0;
    double hbm_ask = 0;
    UnitKind kind = UnitKind::kChain;
    bool mem = false;
    switch (op.kind) {
      case OpKind::kCompute:
        if (!compute_stream) return "kernels on a stream other than the GPU's compute stream";
        any_compute = true;
        dc = compute_.get(gpu, op);
        break;
      case OpKind::kCollective: {
        communicates_[static_cast<std::size_t>(op.gpu)] = 1;
        // An in-line collective with one representative member joins the compute chain; an
        // expert-parallel all-to-all stays a unit of its own: chained, it cost a constant
        // 34,550 ns per step too much on the 8-GPU case of tests/test_expert_parallel.cpp with
        // the ep and edp mirrors composed (docs/block-eval.md, "Scope").
        const bool alone =
            op.fixed_ns >= 0 || (group_members_[static_cast<std::size_t>(op.group)] == 1 &&
                                 op.collective != core::CollectiveKind::kAllToAll);
        if (op.fixed_ns >= 0) {
          dm = op.fixed_ns;
        } else {
          const TransferTime tt = transfer_of(op);
          dm = tt.ns;
          hbm_ask = tt.hbm_bytes_per_ns;
        }
        if (!(compute_stream && alone)) kind = UnitKind::kComm;
        break;
      }
      case OpKind::kCopy:
        if (op.copy_kind == core::CopyKind::kD2D) return "on-device copies";
        if (op.fixed_ns >= 0) {
          dm = op.fixed_ns;
        } else {
          const TransferTime tt = transfer_of(op);
          dm = tt.ns;
          hbm_ask = tt.hbm_bytes_per_ns;
        }
        kind = UnitKind::kCopy;
        break;
      default:
        mem = true;
        break;
    }
    int& cur = open[static_cast<std::size_t>(op.stream)];
    if (kind != UnitKind::kChain || !op.deps.empty() || cur < 0 ||
        units_[static_cast<std::size_t>(cur)].step != op.step)
      cur = -1;
    const int slot = static_cast<int>(st.op.size());
    if (cur < 0) {
      Unit u;
      u.kind = kind;
      u.stream = op.stream;
      u.gpu = op.gpu;
      u.step = op.step;
      u.seg = seg;
      u.first = u.end = slot;
      u.wait_first = stream_waits;
      u.wait_end = static_cast<int>(waits_.size());
      if (kind == UnitKind::kComm) {
        u.fixed = op.fixed_ns >= 0;
        u.sms = sms_of(op);
        u.instance = op.instance;
        u.members = op.group >= 0 ? group_members_[static_cast<std::size_t>(op.group)] : 1;
      }
      u.hbm_ask = hbm_ask;
      if (kind == UnitKind::kCopy && op.copy_kind == core::CopyKind::kPeer && op.peer_gpu != op.gpu)
        u.peer_gpu = op.peer_gpu;
      cur = static_cast<int>(units_.size());
      units_.push_back(u);
      st.units.push_back(cur);
      if (kind == UnitKind::kChain) ++chains_;
    }
    Unit& u = units_[static_cast<std::size_t>(cur)];
    const TimeNs er = th.cum + (mem ? 0 : latency);
    st.op.push_back(op.id);
    st.er.push_back(er);
    if (mem) {
      st.mem.push_back(slot);
      st.mem_info.push_back({op.kind == OpKind::kAlloc ? op.bytes : -op.bytes, op.gpu,
                             static_cast<std::uint8_t>(op.mem_category), op.step <= 1, op.stream,
                             static_cast<int>(st.mem_info.size())});
    }
    const std::size_t f = static_cast<std::size_t>(u.first), k = static_cast<std::size_t>(slot);
    u.host_slack = std::max(u.host_slack, er - (st.pc[k] + st.pm[k] - st.pc[f] - st.pm[f]));
    // docs/block-eval.md, "Re-rating": a kernel's HBM bytes and demand.
    const double kernel_hbm = op.kind == OpKind::kCompute ? static_cast<double>(op.bytes) : 0.0;
    st.hbm.push_back(kernel_hbm);
    if (dc > 0) st.max_demand = std::max(st.max_demand, kernel_hbm / static_cast<double>(dc));
    st.pc.push_back(st.pc.back() + dc);
    st.pm.push_back(st.pm.back() + dm);
    ++u.end;
    if (kind == UnitKind::kChain) {
      ++chained_ops_;
      // A free a backpressure check may wait for ends its chain: its end is an event.
      if (!bp_free_.empty() && bp_free_[static_cast<std::size_t>(op.id)]) {
        target(op.id);
        cur = -1;
      }
    } else {
      u.transfer_ns = dm;
      cur = -1;
    }
  }
  if (!any_compute) return "no kernels";
  // Waiters by target, in the order they were read (counting sort).
  woken_first_.assign(target_end_.size() + 1, 0);
  for (const auto& [k, w] : waiters_) ++woken_first_[static_cast<std::size_t>(k) + 1];
  for (std::size_t k = 1; k < woken_first_.size(); ++k) woken_first_[k] += woken_first_[k - 1];
  woken_.assign(waiters_.size(), 0);
  std::vector<int> fill(woken_first_.begin(), woken_first_.end() - 1);
  for (const auto& [k, w] : waiters_)
    woken_[static_cast<std::size_t>(fill[static_cast<std::size_t>(k)]++)] = w;
  inst_arrived_.assign(static_cast<std::size_t>(program_.collective_instances), 0);
  inst_units_.assign(static_cast<std::size_t>(program_.collective_instances), {});
  return {};
}

}  // namespace csim::block::detail
