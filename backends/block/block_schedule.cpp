// docs/block-eval.md, "Host" and "Schedule": host segments, streams, the event loop, and the
// block path's entry points.
#include "backends/block/schedule.hpp"

#include <algorithm>

#include "core/cost/hbm_traffic.hpp"
#include "core/error.hpp"

namespace csim::block::detail {

// [SECTION] Host ---------------------------------------------------------------------------------

// docs/program.md, "Execution semantics" 1-3, and docs/block-eval.md, "Host": a thread issues its
// ops in order, python then dispatch each; a segment (the ops from one host wait to the next)
// is issued from its ready time = max(the previous segment's issue end, its waits' ends); an op of
// it ends issuing at ready + the segment's python + dispatch up to it, and may start on its
// stream a launch latency later (allocations and frees: at once). No thread waits for the GIL or
// a core (build() checks), so a thread's clock is its own.
void Schedule::release_segments(int t) {
  ThreadState& th = threads_[static_cast<std::size_t>(t)];
  while (th.released + 1 < static_cast<int>(th.segs.size())) {
    const int k = th.released + 1;
    HostSeg& sg = th.segs[static_cast<std::size_t>(k)];
    TimeNs ready = k == 0 ? 0
                          : th.segs[static_cast<std::size_t>(k - 1)].ready +
                                th.segs[static_cast<std::size_t>(k - 1)].cum_end;
    for (int w = sg.wait_first; w < sg.wait_end; ++w) {
      const TimeNs e = target_end_[static_cast<std::size_t>(waits_[static_cast<std::size_t>(w)])];
      if (e < 0 || e > now_) return;  // kThreadResume when it ends
      ready = std::max(ready, e);
    }
    if (sg.check >= 0 && !bp_clear(t, sg.check, ready)) return;  // block_backpressure.cpp
    ready = std::max(ready, now_);
    sg.ready = ready;
    th.released = k;
    for (; th.mark_next < th.marks.size() && th.marks[th.mark_next].seg == k; ++th.mark_next) {
      const StepMark& m = th.marks[th.mark_next];
      (m.drawn ? step_drawn_ : step_begin_)[at(th.gpu, m.step)] = ready + m.cum;
    }
    // Host work and markers end when issued.
    for (; th.host_next < th.host_ops.size() && th.host_ops[th.host_next].seg == k;
         ++th.host_next) {
      const HostOp& h = th.host_ops[th.host_next];
      const TimeNs end = ready + h.cum_after;
      if (h.step >= 1) {
        TimeNs& e = step_end_[at(th.gpu, h.step)];
        e = std::max(e, end);
      }
      const int tk = target_of_op_[static_cast<std::size_t>(h.op)];
      if (tk >= 0) {
        target_end_[static_cast<std::size_t>(tk)] = end;
        push(end, Ev::kHostDone, h.op);
      }
    }
    for (int s : streams_of_gpu_[static_cast<std::size_t>(th.gpu)]) push(now_, Ev::kStreamCheck, s);
  }
}

// [SECTION] Streams ------------------------------------------------------------------------------

// docs/cost-model.md, "Resource sharing" and "Stragglers": the rate factor of a
// kernel that starts now on `gpu`.
double Schedule::factor(int gpu) const {
  double f = scenario_.cluster.slowdown_of(gpu);
  const core::GpuSpec& g = scenario_.cluster.gpu;
  const int taken = std::min(comm_sms_[static_cast<std::size_t>(gpu)], g.sm_count - 1);
  if (taken > 0) f *= static_cast<double>(g.sm_count) / static_cast<double>(g.sm_count - taken);
  return f;
}

// docs/block-eval.md, "Re-rating": the HBM bandwidth the GPU's running kernel gets when it
// asks for more than the holders there (NCCL kernels and copies moving data) leave it.
double Schedule::hbm_level(int gpu) {
  const auto& holders = hbm_holders_[static_cast<std::size_t>(gpu)];
  if (holders.empty() || hbm_bytes_per_ns_ <= 0) return hbm_bytes_per_ns_;
  asks_scratch_.clear();
  for (const auto& h : holders) asks_scratch_.push_back(h.second);
  return core::hbm_level(hbm_bytes_per_ns_, asks_scratch_);
}

// The stream's prefix sums of max(f x d, M / level) (built once per state).
int Schedule::bound_of(StreamSlots& st, double f, double level) {
  for (std::size_t i = 0; i < st.bound.size(); ++i)
    if (st.bound[i].f == f && st.bound[i].level == level) return static_cast<int>(i);
  StreamSlots::Bound b{f, level, {}};
  b.prefix.resize(st.pc.size());
  b.prefix[0] = 0;
  for (std::size_t k = 0; k + 1 < st.pc.size(); ++k) {
    const double d = static_cast<double>(st.pc[k + 1] - st.pc[k]);
    b.prefix[k + 1] = b.prefix[k] + std::max(f * d, st.hbm[k] / level);
  }
  st.bound.push_back(std::move(b));
  return static_cast<int>(st.bound.size()) - 1;
}

// -1 when no kernel of the chain's stream asks for more HBM than it gets at factor f
// (docs/cost-model.md, "Resource sharing": a kernel asks demand / f and gets min(ask, level)).
int Schedule::bound_for(const Unit& u, double f) {
  StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
  if (hbm_bytes_per_ns_ <= 0 || st.max_demand == 0) return -1;
  const double level = hbm_level(u.gpu);
  if (st.max_demand / f <= level) return -1;
  return bound_of(st, f, level);
}

// A holder's HBM traffic on `gpu` starts (ask > 0) or ends (0): the running chain is re-rated.
void Schedule::hbm_change(int gpu, int unit, double ask) {
  auto& holders = hbm_holders_[static_cast<std::size_t>(gpu)];
  if (ask > 0) {
    holders.push_back({unit, ask});
  } else {
    const auto it = std::find_if(holders.begin(), holders.end(),
                                 [unit](const auto& h) { return h.first == unit; });
    if (it == holders.end()) return;
    holders.erase(it);
  }
  rerate(gpu);
}

void Schedule::check_stream(int s) {
  StreamSlots& st = streams_[static_cast<std::size_t>(s)];
  if (st.busy || st.next >= st.units.size()) return;
  const int u = st.units[st.next];
  const Unit& un = units_[static_cast<std::size_t>(u)];
  const ThreadState& th = threads_[static_cast<std::size_t>(st.thread)];
  if (th.released < un.seg) return;  // not issued yet
  const TimeNs earliest =
      th.segs[static_cast<std::size_t>(un.seg)].ready + st.er[static_cast<std::size_t>(un.first)];
  if (now_ < earliest) {
    push(earliest, Ev::kStreamCheck, s);
    return;
  }
  for (int w = un.wait_first; w < un.wait_end; ++w) {
    const TimeNs e = target_end_[static_cast<std::size_t>(waits_[static_cast<std::size_t>(w)])];
    if (e < 0 || e > now_) return;  // kStreamCheck when it ends
  }
  ++st.next;
  st.busy = true;
  start_unit(u);
}

// Allocations and frees of a chain's current segment before slot `upto` at their times.
void Schedule::emit_mem(Unit& u, int upto) {
  const StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
  for (; u.mem_next < static_cast<int>(st.mem.size()) &&
         st.mem[static_cast<std::size_t>(u.mem_next)] < upto;
       ++u.mem_next) {
    const int j = st.mem[static_cast<std::size_t>(u.mem_next)];
    mem_.push_back({time_of(u, j), st.op[static_cast<std::size_t>(j)],
                    &st.mem_info[static_cast<std::size_t>(u.mem_next)]});
  }
}

// A chain whose launches gate it (the host behind the GPU): each op at max(the previous op's end,
// its earliest start), kernels rounded one by one, as the op-level simulator; returns the end.
TimeNs Schedule::walk_stepwise(Unit& u) {
  const StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
  const TimeNs ready =
      threads_[static_cast<std::size_t>(st.thread)].segs[static_cast<std::size_t>(u.seg)].ready;
  TimeNs t = u.t0;
  std::size_t m = static_cast<std::size_t>(u.mem_next);
  for (int j = u.first; j < u.end; ++j) {
    const std::size_t k = static_cast<std::size_t>(j);
    t = std::max(t, ready + st.er[k]);
    if (m < st.mem.size() && st.mem[m] == j) {
      mem_.push_back({t, st.op[k], &st.mem_info[m]});
      ++m;
    }
    const TimeNs c = st.pc[k + 1] - st.pc[k];
    if (u.bound >= 0) {
      const std::vector<double>& b = st.bound[static_cast<std::size_t>(u.bound)].prefix;
      t += static_cast<TimeNs>(std::llround(b[k + 1] - b[k])) + st.pm[k + 1] - st.pm[k];
      continue;
    }
    t += (u.factor == 1.0 ? c
                          : static_cast<TimeNs>(std::llround(static_cast<double>(c) * u.factor))) +
         st.pm[k + 1] - st.pm[k];
  }
  u.mem_next = static_cast<int>(m);
  return t;
}

void Schedule::start_unit(int ui) {
  Unit& u = units_[static_cast<std::size_t>(ui)];
  const StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
  u.start_ns = now_;
  if (u.kind == UnitKind::kChain) {
    u.seg_pos = u.first;
    u.t0 = now_;
    u.factor = factor(u.gpu);
    u.bound = bound_for(u, u.factor);
    u.mem_next =
        static_cast<int>(std::lower_bound(st.mem.begin(), st.mem.end(), u.first) - st.mem.begin());
    const TimeNs ready =
        threads_[static_cast<std::size_t>(st.thread)].segs[static_cast<std::size_t>(u.seg)].ready;
    TimeNs end = 0;
    if (now_ >= ready + u.host_slack) {  // no launch gates an op of the chain
      end = time_of(u, u.end);
    } else {
      u.stepwise = true;
      end = walk_stepwise(u);
    }
    if (u.stepwise ||
        st.pc[static_cast<std::size_t>(u.end)] > st.pc[static_cast<std::size_t>(u.first)])
      running_chain_[static_cast<std::size_t>(u.gpu)] = ui;
    push(end, Ev::kChainDone, ui, ++u.gen);
    return;
  }
  if (u.kind == UnitKind::kCopy) {
    if (u.hbm_ask > 0) {
      hbm_change(u.gpu, ui, u.hbm_ask);
      if (u.peer_gpu >= 0) hbm_change(u.peer_gpu, ui, u.hbm_ask);
    }
    push(now_ + u.transfer_ns, Ev::kTransferDone, ui);
    return;
  }
  // docs/program.md 4: a collective moves data once every member has started; each member's
  // kernel holds its SMs from its own start.
  sms_change(u.gpu, u.sms);
  if (u.fixed) {
    push(now_ + u.transfer_ns, Ev::kTransferDone, ui);
    return;
  }
  const std::size_t in = static_cast<std::size_t>(u.instance);
  inst_units_[in].push_back(ui);
  if (++inst_arrived_[in] == u.members) {
    // The data moves: each member's NCCL kernel declares its HBM traffic (docs/cost-model.md,
    // "Resource sharing").
    for (int m : inst_units_[in]) {
      const Unit& mu = units_[static_cast<std::size_t>(m)];
      if (mu.hbm_ask > 0) hbm_change(mu.gpu, m, mu.hbm_ask);
    }
    // docs/block-eval.md, "Transfers": with all-to-alls in the Program its flows share the links
    // with the others in flight; otherwise it takes its alone time.
    if (shared_links_)
      net_start(static_cast<int>(in),
                program_.ops[static_cast<std::size_t>(st.op[static_cast<std::size_t>(u.first)])]);
    else
      push(now_ + u.transfer_ns, Ev::kTransferDone, -1 - static_cast<std::int64_t>(in));
  }
}

// docs/block-eval.md, "Re-rating": when the NCCL SMs of a GPU change, the kernels of its running
// chain that start after now take the new factor; the one running keeps its duration.
void Schedule::rerate(int gpu) {
  const int ui = running_chain_[static_cast<std::size_t>(gpu)];
  if (ui < 0) return;
  Unit& u = units_[static_cast<std::size_t>(ui)];
  const double f = factor(gpu);
  const int b = bound_for(u, f);
  if ((f == u.factor && b == u.bound) || u.stepwise) return;
  // The first slot of the current segment starting after now (times grow with the slot).
  int lo = u.seg_pos, hi = u.end;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (time_of(u, mid) > now_) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  // The kernel running at now (slot lo - 1, started by now) keeps its done work and runs the rest
  // at the new rate, as the op-level simulator re-rates it (docs/cost-model.md, "Resource
  // sharing"): with e and s its end and start, it ends at now + llround((e - now) / (e - s) x d'),
  // d' its duration in the new state. The new segment begins at that kernel, from the virtual
  // start (new end - d'), so that a second change at the same time finds it and the same fraction.
  const StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
  const int k = lo - 1;
  const std::size_t kk = static_cast<std::size_t>(k);
  int seg = lo;
  TimeNs t0 = lo < u.end ? time_of(u, lo) : -1;
  if (k >= u.seg_pos && st.pc[kk + 1] > st.pc[kk] && time_of(u, k) <= now_) {
    const TimeNs s_k = time_of(u, k), e_k = time_of(u, lo);
    const TimeNs d_new = slot_kernel_ns(st, kk, f, b);
    const double left = static_cast<double>(e_k - now_) / static_cast<double>(e_k - s_k);
    t0 = now_ + static_cast<TimeNs>(std::llround(left * static_cast<double>(d_new))) - d_new;
    seg = k;
  } else if (lo == u.end) {
    return;
  }
  emit_mem(u, lo);
  u.seg_pos = seg;
  u.t0 = t0;
  u.factor = f;
  u.bound = b;
  push(time_of(u, u.end), Ev::kChainDone, ui, ++u.gen);
}

// Slot k's kernel time in state (f, bound), rounded as time_of rounds a one-slot segment.
TimeNs Schedule::slot_kernel_ns(const StreamSlots& st, std::size_t k, double f, int bound) const {
  const TimeNs c = st.pc[k + 1] - st.pc[k];
  if (bound >= 0) {
    const std::vector<double>& p = st.bound[static_cast<std::size_t>(bound)].prefix;
    return static_cast<TimeNs>(std::llround(p[k + 1] - p[k]));
  }
  return f == 1.0 ? c : static_cast<TimeNs>(std::llround(static_cast<double>(c) * f));
}

void Schedule::sms_change(int gpu, int delta) {
  comm_sms_[static_cast<std::size_t>(gpu)] += delta;
  rerate(gpu);
}

void Schedule::target_done(OpId op, TimeNs t) {
  const int k = target_of_op_[static_cast<std::size_t>(op)];
  if (k < 0) return;
  target_end_[static_cast<std::size_t>(k)] = t;
  bp_freed(op, t);
  for (int i = woken_first_[static_cast<std::size_t>(k)];
       i < woken_first_[static_cast<std::size_t>(k) + 1]; ++i) {
    const int w = woken_[static_cast<std::size_t>(i)];
    if (w >= 0) {
      push(t, Ev::kStreamCheck, w);
    } else {
      push(t, Ev::kThreadResume, -1 - w);
    }
  }
}

void Schedule::finish_unit(int ui, TimeNs end) {
  Unit& u = units_[static_cast<std::size_t>(ui)];
  StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
  const std::size_t g = static_cast<std::size_t>(u.gpu);
  bool with_kernels = false;
  if (u.kind == UnitKind::kChain) {
    if (running_chain_[g] == ui) running_chain_[g] = -1;
    if (!u.stepwise) emit_mem(u, u.end);
    with_kernels =
        st.pc[static_cast<std::size_t>(u.end)] > st.pc[static_cast<std::size_t>(u.first)];
  } else if (u.kind == UnitKind::kComm) {
    if (u.hbm_ask > 0) hbm_change(u.gpu, ui, 0);
    sms_change(u.gpu, -u.sms);
  } else if (u.hbm_ask > 0) {  // a copy
    hbm_change(u.gpu, ui, 0);
    if (u.peer_gpu >= 0) hbm_change(u.peer_gpu, ui, 0);
  }
  if (u.step >= 1) {
    TimeNs& e = step_end_[at(u.gpu, u.step)];
    e = std::max(e, end);
    if (with_kernels) {
      inline_iv_[g].push_back({u.start_ns, end});
      inline_ns_[g].push_back(st.pm[static_cast<std::size_t>(u.end)] -
                              st.pm[static_cast<std::size_t>(u.first)]);
      busy_[g].push_back({u.start_ns, end});
    } else if (u.kind != UnitKind::kCopy) {
      comm_iv_[g].push_back({u.start_ns, end});
    }
  }
  st.busy = false;
  push(end, Ev::kStreamCheck, u.stream);
  target_done(st.op[static_cast<std::size_t>(u.end - 1)], end);
}

EvalResult Schedule::run() {
  const std::size_t gpus = static_cast<std::size_t>(program_.world_gpus);
  running_chain_.assign(gpus, -1);
  comm_sms_.assign(gpus, 0);
  hbm_holders_.assign(gpus, {});
  hbm_bytes_per_ns_ = scenario_.cluster.gpu.hbm_sharing
                          ? scenario_.cluster.gpu.mem_bw_bytes_per_s *
                                scenario_.cluster.gpu.mem_bw_efficiency * 1e-9
                          : 0.0;
  step_begin_.assign(gpus * static_cast<std::size_t>(steps_ + 1), -1);
  step_end_.assign(step_begin_.size(), -1);
  step_drawn_.assign(step_begin_.size(), -1);
  inline_iv_.assign(gpus, {});
  inline_ns_.assign(gpus, {});
  busy_.assign(gpus, {});
  comm_iv_.assign(gpus, {});
  for (std::size_t t = 0; t < threads_.size(); ++t)
    push(0, Ev::kThreadResume, static_cast<std::int64_t>(t));
  while (!events_.empty()) {
    const Event ev = events_.pop(&now_);
    switch (ev.type) {
      case Ev::kStreamCheck:
        check_stream(static_cast<int>(ev.subject));
        break;
      case Ev::kThreadResume:
        release_segments(static_cast<int>(ev.subject));
        break;
      case Ev::kHostDone:
        target_done(static_cast<OpId>(ev.subject), now_);
        break;
      case Ev::kChainDone:
        if (units_[static_cast<std::size_t>(ev.subject)].gen == ev.gen)
          finish_unit(static_cast<int>(ev.subject), now_);
        break;
      case Ev::kNetGo:
        net_go(static_cast<int>(ev.subject));
        break;
      case Ev::kNetCheck:
        if (ev.gen == net_gen_) {
          net_advance();
          net_schedule_check();
        }
        break;
      case Ev::kTransferDone:
        if (ev.subject >= 0) {
          finish_unit(static_cast<int>(ev.subject), now_);
        } else {
          for (int u : inst_units_[static_cast<std::size_t>(-1 - ev.subject)]) finish_unit(u, now_);
        }
        break;
    }
  }
  for (const StreamSlots& st : streams_)
    CSIM_ASSERT_MSG(st.next == st.units.size() && !st.busy, "block schedule: a unit never started");
  // docs/memory.md, as core/program/memory_timeline.cpp: memory ops by time, then op id.
  std::sort(mem_.begin(), mem_.end(), [](const MemEvent& a, const MemEvent& b) {
    return a.t != b.t ? a.t < b.t : a.op < b.op;
  });
  std::vector<GpuPeak> peaks = gpu_peaks();
  verdict_ = scan_memory(peaks, {});
  return figures(std::move(peaks));
}

}  // namespace csim::block::detail

namespace csim::block {

using detail::Schedule;

std::string block_path_unsupported(const core::Scenario& scenario, const core::Program& program) {
  Schedule s(scenario, program);
  return s.build();
}

std::optional<EvalResult> evaluate_block(const core::Scenario& scenario,
                                         const core::Program& program, std::string* why) {
  Schedule s(scenario, program);
  std::string reason = s.build();
  if (reason.empty()) return s.run();
  if (why) *why = std::move(reason);
  return std::nullopt;
}

EvalResult evaluate(const core::Scenario& scenario, const core::Program& program) {
  Schedule s(scenario, program);
  const std::string why = s.build();
  if (why.empty()) return s.run();
  EvalResult r = evaluate_op_level(scenario, program);
  r.fallback_reason = why;
  return r;
}

}  // namespace csim::block
