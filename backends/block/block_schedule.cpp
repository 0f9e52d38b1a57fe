// docs/block-eval.md, "Host" and "Schedule": host segments, streams, the event loop, and the
// block path's entry points.
#include "backends/block/schedule.hpp"

#include <algorithm>

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

// docs/cost-model.md, "Compute-communication interference" and "Stragglers": the rate factor of a
// kernel that starts now on `gpu`.
double Schedule::factor(int gpu) const {
  double f = s_.cluster.slowdown_of(gpu);
  const core::GpuSpec& g = s_.cluster.gpu;
  const int taken = std::min(comm_sms_[static_cast<std::size_t>(gpu)], g.sm_count - 1);
  if (taken > 0) f *= static_cast<double>(g.sm_count) / static_cast<double>(g.sm_count - taken);
  return f;
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
  if (++inst_arrived_[in] == u.members)
    push(now_ + u.transfer_ns, Ev::kTransferDone, -1 - static_cast<std::int64_t>(in));
}

// docs/block-eval.md, "Re-rating": when the NCCL SMs of a GPU change, the kernels of its running
// chain that start after now take the new factor; the one running keeps its duration.
void Schedule::rerate(int gpu) {
  const int ui = running_chain_[static_cast<std::size_t>(gpu)];
  if (ui < 0) return;
  Unit& u = units_[static_cast<std::size_t>(ui)];
  const double f = factor(gpu);
  if (f == u.factor || u.stepwise) return;
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
  if (lo == u.end) return;
  const TimeNs t0 = time_of(u, lo);
  emit_mem(u, lo);
  u.seg_pos = lo;
  u.t0 = t0;
  u.factor = f;
  push(time_of(u, u.end), Ev::kChainDone, ui, ++u.gen);
}

void Schedule::sms_change(int gpu, int delta) {
  comm_sms_[static_cast<std::size_t>(gpu)] += delta;
  rerate(gpu);
}

void Schedule::target_done(OpId op, TimeNs t) {
  const int k = target_of_op_[static_cast<std::size_t>(op)];
  if (k < 0) return;
  target_end_[static_cast<std::size_t>(k)] = t;
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
    sms_change(u.gpu, -u.sms);
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
  const std::size_t gpus = static_cast<std::size_t>(p_.world_gpus);
  running_chain_.assign(gpus, -1);
  comm_sms_.assign(gpus, 0);
  step_begin_.assign(gpus * static_cast<std::size_t>(steps_ + 1), -1);
  step_end_.assign(step_begin_.size(), -1);
  step_drawn_.assign(step_begin_.size(), -1);
  inline_iv_.assign(gpus, {});
  inline_ns_.assign(gpus, {});
  busy_.assign(gpus, {});
  comm_iv_.assign(gpus, {});
  for (std::size_t t = 0; t < threads_.size(); ++t)
    push(0, Ev::kThreadResume, static_cast<std::int64_t>(t));
  while (!q_.empty()) {
    const Event ev = q_.pop(&now_);
    switch (ev.type) {
      case Ev::kStreamCheck:
        check_stream(static_cast<int>(ev.a));
        break;
      case Ev::kThreadResume:
        release_segments(static_cast<int>(ev.a));
        break;
      case Ev::kHostDone:
        target_done(static_cast<OpId>(ev.a), now_);
        break;
      case Ev::kChainDone:
        if (units_[static_cast<std::size_t>(ev.a)].gen == ev.gen)
          finish_unit(static_cast<int>(ev.a), now_);
        break;
      case Ev::kTransferDone:
        if (ev.a >= 0) {
          finish_unit(static_cast<int>(ev.a), now_);
        } else {
          for (int u : inst_units_[static_cast<std::size_t>(-1 - ev.a)]) finish_unit(u, now_);
        }
        break;
    }
  }
  for (const StreamSlots& st : streams_)
    CSIM_ASSERT_MSG(st.next == st.units.size() && !st.busy, "block schedule: a unit never started");
  return figures();
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
