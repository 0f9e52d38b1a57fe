// docs/block-eval.md, "Schedule".
//
// [SECTION] index
//   Units        the Program cut into chains and single comm/copy ops (one pass over the ops)
//   Transfers    each distinct transfer timed once, alone, on the flow network (mirrors included)
//   Host         the issuing threads: python + dispatch per op, host waits
//   Streams      FIFO of units; a chain's kernels re-rated when NCCL kernels start or end
//   Figures      step time, memory peaks, exposed communication
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "backends/block/block_schedule.hpp"
#include "core/cost/collective_cost.hpp"
#include "core/cost/compute_cost.hpp"
#include "core/engine/event_queue.hpp"
#include "core/engine/flow_network.hpp"
#include "core/error.hpp"
#include "core/topology.hpp"

namespace csim::block {
namespace {

using core::Op;
using core::OpId;
using core::OpKind;

enum class UnitKind : std::uint8_t { kChain, kComm, kCopy };
enum class Piece : std::uint8_t { kCompute, kComm, kMem };

struct Unit {
  UnitKind kind = UnitKind::kChain;
  int stream = 0, gpu = 0, step = 0;
  int first = 0, end = 0;  // slots [first, end) in Schedule::slot_op_
  bool has_compute = false;
  TimeNs comm_ns = 0;      // chain: its in-line collectives (fixed durations)
  TimeNs transfer_ns = 0;  // kComm / kCopy: the transfer alone (docs/block-eval.md, "Transfers")
  // Run state.
  TimeNs start_ns = -1, end_ns = -1;
  int seg_pos = 0;  // chain: first slot of the current rate segment
  double factor = 1;
  std::uint32_t gen = 0;
};

enum class Ev : std::uint8_t { kStreamCheck, kChainDone, kTransferDone, kThreadResume, kHostDone };
struct Event {
  Ev type;
  std::uint32_t gen;
  std::int64_t a;
};

struct MemEvent {
  TimeNs t;
  OpId op;
};

// What a transfer's plan depends on (as the op-level simulator's plan cache).
using PlanKey = std::tuple<int, int, int, int, int, Bytes>;

class Schedule {
 public:
  Schedule(const core::Scenario& s, const core::Program& p)
      : s_(s), p_(p), comm_(core::comm_params_for(s)), topo_(s.cluster), flows_(topo_.links()) {}
  EvalResult run();

 private:
  const core::Scenario& s_;
  const core::Program& p_;
  core::CommParams comm_;
  core::Topology topo_;
  engine::FlowNetwork flows_;
  TimeNs flow_clock_ = 0;
  std::map<PlanKey, TimeNs> transfer_ns_;
  std::map<std::vector<int>, std::vector<int>> mirrors_;
  engine::EventQueue<Event> q_;
  TimeNs now_ = 0;

  // [SECTION] Units
  std::vector<Unit> units_;
  std::vector<OpId> slot_op_;
  std::vector<TimeNs> slot_dur_;    // base duration (compute: before the rate factor)
  std::vector<Piece> slot_piece_;
  std::vector<TimeNs> slot_earliest_;  // issue end + launch latency
  std::vector<TimeNs> slot_start_;
  std::vector<int> slot_of_op_, unit_of_op_;
  std::vector<int> target_of_op_;       // dense index of ops others wait for, else -1
  std::vector<TimeNs> target_end_;      // by target: end, -1 until known
  std::vector<std::vector<int>> target_streams_, target_threads_;
  std::vector<std::vector<int>> stream_units_;  // per stream, in order
  std::vector<std::size_t> stream_next_;        // next unit to start
  std::vector<char> stream_busy_;
  std::vector<int> stream_enqueued_;  // units whose ops are all issued
  std::vector<int> compute_stream_of_gpu_;
  std::vector<int> running_chain_;  // per GPU: the chain with compute kernels now running, -1
  std::vector<int> comm_sms_;
  std::vector<int> inst_expected_, inst_arrived_;
  std::vector<TimeNs> inst_last_;
  std::vector<std::vector<int>> inst_units_;
  // Host threads.
  std::vector<std::vector<OpId>> thread_ops_;
  std::vector<std::size_t> thread_pos_;
  std::vector<TimeNs> thread_t_;
  // Figures.
  std::vector<MemEvent> mem_;
  std::vector<TimeNs> step_begin_, step_end_;  // per GPU, step >= 1
  std::vector<TimeNs> inline_comm_;            // per GPU: chains' collectives
  std::vector<std::vector<std::pair<TimeNs, TimeNs>>> busy_, comm_iv_;  // per GPU
  std::int64_t chained_ops_ = 0, chains_ = 0;

  void build();
  TimeNs transfer_of(const Op& op);
  TimeNs time_plan(core::TransferPlan plan, const std::vector<int>& mirror_gpus);
  void add_mirror_flows(core::TransferPlan& plan, const std::vector<int>& mirrors) const;
  const std::vector<int>& mirrors_of(const std::vector<int>& gpus);
  double factor(int gpu) const;
  int sms_of(const Op& op) const {
    const int n = s_.cluster.gpu.nccl_sms;
    return op.collective == core::CollectiveKind::kSendRecv ? std::min(2, n) : n;
  }
  void push(TimeNs t, Ev type, std::int64_t a, std::uint32_t gen = 0) {
    q_.push(t, Event{type, gen, a});
  }
  void advance_thread(int t);
  void check_stream(int s);
  void start_unit(int u);
  TimeNs walk(Unit& u, int from, TimeNs t0);
  void rerate(int gpu);
  void sms_change(int gpu, int delta);
  void finish_unit(int u, TimeNs end);
  void target_done(OpId op, TimeNs t);
  EvalResult figures() const;
};

// [SECTION] Units --------------------------------------------------------------------------------

void Schedule::build() {
  const std::size_t n = p_.ops.size();
  slot_of_op_.assign(n, -1);
  unit_of_op_.assign(n, -1);
  target_of_op_.assign(n, -1);
  int targets = 0;
  for (const Op& op : p_.ops)
    for (const core::Dep& d : op.deps)
      if (target_of_op_[static_cast<std::size_t>(d.op)] < 0)
        target_of_op_[static_cast<std::size_t>(d.op)] = targets++;
  target_end_.assign(static_cast<std::size_t>(targets), -1);
  target_streams_.assign(static_cast<std::size_t>(targets), {});
  target_threads_.assign(static_cast<std::size_t>(targets), {});
  inst_expected_.assign(static_cast<std::size_t>(p_.collective_instances), 0);
  for (const Op& op : p_.ops)
    if (op.kind == OpKind::kCollective && op.instance >= 0) ++inst_expected_[static_cast<std::size_t>(op.instance)];
  inst_arrived_.assign(inst_expected_.size(), 0);
  inst_last_.assign(inst_expected_.size(), 0);
  inst_units_.assign(inst_expected_.size(), {});
  compute_stream_of_gpu_.assign(static_cast<std::size_t>(p_.world_gpus), -1);
  for (const Op& op : p_.ops)
    if (op.kind == OpKind::kCompute && compute_stream_of_gpu_[static_cast<std::size_t>(op.gpu)] < 0)
      compute_stream_of_gpu_[static_cast<std::size_t>(op.gpu)] = op.stream;
  stream_units_.assign(p_.streams.size(), {});
  thread_ops_.assign(p_.threads.size(), {});
  for (const Op& op : p_.ops) thread_ops_[static_cast<std::size_t>(op.thread)].push_back(op.id);
  std::vector<TimeNs> op_dur(n, 0);
  std::vector<Piece> op_piece(n, Piece::kMem);
  const core::GpuSpec& gpu = s_.cluster.gpu;
  std::vector<int> open(p_.streams.size(), -1);  // open chain per stream
  for (const std::vector<OpId>& ops : thread_ops_) {
    for (const OpId id : ops) {
      const Op& op = p_.ops[static_cast<std::size_t>(id)];
      bool host_wait = false;
      for (const core::Dep& d : op.deps) {
        const int k = target_of_op_[static_cast<std::size_t>(d.op)];
        if (d.kind == core::DepKind::kHostWaits) {
          host_wait = true;
          target_threads_[static_cast<std::size_t>(k)].push_back(op.thread);
        } else if (op.stream >= 0) {
          target_streams_[static_cast<std::size_t>(k)].push_back(op.stream);
        }
      }
      // A host wait closes every chain of the thread: a chain's ops are issued together.
      if (host_wait) std::fill(open.begin(), open.end(), -1);
      if (op.stream < 0) continue;
      const bool compute_stream = op.stream == compute_stream_of_gpu_[static_cast<std::size_t>(op.gpu)];
      Piece piece = Piece::kMem;
      TimeNs dur = 0;
      UnitKind kind = UnitKind::kChain;
      if (op.kind == OpKind::kCompute) {
        piece = Piece::kCompute;
        dur = core::compute_duration_ns(gpu, op.compute_kind, op.dtype, op.flops, op.bytes);
      } else if (op.kind == OpKind::kCollective) {
        piece = Piece::kComm;
        const bool alone = op.fixed_ns >= 0 || inst_expected_[static_cast<std::size_t>(op.instance)] == 1;
        dur = op.fixed_ns >= 0 ? op.fixed_ns : transfer_of(op);
        if (!(compute_stream && alone)) kind = UnitKind::kComm;
      } else if (op.kind == OpKind::kCopy) {
        piece = Piece::kComm;
        dur = op.fixed_ns >= 0 ? op.fixed_ns : transfer_of(op);
        kind = UnitKind::kCopy;
      }
      int& cur = open[static_cast<std::size_t>(op.stream)];
      const bool has_dep = !op.deps.empty();
      if (kind != UnitKind::kChain || has_dep || cur < 0 ||
          units_[static_cast<std::size_t>(cur)].step != op.step)
        cur = -1;
      if (cur < 0) {
        Unit u;
        u.kind = kind;
        u.stream = op.stream;
        u.gpu = op.gpu;
        u.step = op.step;
        u.first = u.end = 0;
        cur = static_cast<int>(units_.size());
        units_.push_back(u);
        stream_units_[static_cast<std::size_t>(op.stream)].push_back(cur);
        if (kind == UnitKind::kChain) ++chains_;
      }
      Unit& u = units_[static_cast<std::size_t>(cur)];
      unit_of_op_[static_cast<std::size_t>(id)] = cur;
      op_dur[static_cast<std::size_t>(id)] = dur;
      op_piece[static_cast<std::size_t>(id)] = piece;
      ++u.end;  // a count until the slots are laid out below
      if (piece == Piece::kCompute) u.has_compute = true;
      if (kind == UnitKind::kChain) {
        ++chained_ops_;
        if (piece == Piece::kComm) u.comm_ns += dur;
      } else {
        u.transfer_ns = dur;
      }
      // Others wait for this op: it ends its unit, so its end is an event.
      if (kind != UnitKind::kChain || target_of_op_[static_cast<std::size_t>(id)] >= 0) cur = -1;
    }
  }
  // Each unit's ops in consecutive slots, in issue order.
  int offset = 0;
  for (Unit& u : units_) {
    const int count = u.end;
    u.first = u.end = offset;
    offset += count;
  }
  slot_op_.resize(static_cast<std::size_t>(offset));
  slot_dur_.resize(slot_op_.size());
  slot_piece_.resize(slot_op_.size());
  for (const std::vector<OpId>& ops : thread_ops_) {
    for (const OpId id : ops) {
      const int ui = unit_of_op_[static_cast<std::size_t>(id)];
      if (ui < 0) continue;
      Unit& u = units_[static_cast<std::size_t>(ui)];
      const std::size_t slot = static_cast<std::size_t>(u.end++);
      slot_of_op_[static_cast<std::size_t>(id)] = static_cast<int>(slot);
      slot_op_[slot] = id;
      slot_dur_[slot] = op_dur[static_cast<std::size_t>(id)];
      slot_piece_[slot] = op_piece[static_cast<std::size_t>(id)];
    }
  }
  slot_earliest_.assign(slot_op_.size(), 0);
  slot_start_.assign(slot_op_.size(), -1);
}

// [SECTION] Transfers ----------------------------------------------------------------------------

// docs/block-eval.md, "Transfers": a transfer alone on the topology, its mirror images included
// (the op-level simulator's plan, backends/sim/sim_executor.cpp), timed once per plan key.
TimeNs Schedule::transfer_of(const Op& op) {
  PlanKey key;
  if (op.kind == OpKind::kCopy) {
    key = {0, static_cast<int>(op.copy_kind), op.gpu, op.peer_gpu, 0, op.bytes};
  } else {
    key = {1, static_cast<int>(op.collective), static_cast<int>(op.algo), op.group, op.root, op.bytes};
  }
  const auto it = transfer_ns_.find(key);
  if (it != transfer_ns_.end()) return it->second;
  core::TransferPlan plan;
  std::vector<int> ends;
  if (op.kind == OpKind::kCopy) {
    const int node = op.gpu / s_.cluster.gpus_per_node;
    core::Endpoint src = core::Endpoint::host(node), dst = core::Endpoint::gpu(op.gpu);
    if (op.copy_kind == core::CopyKind::kPeer) src = core::Endpoint::gpu(op.peer_gpu);
    if (op.copy_kind == core::CopyKind::kD2H) std::swap(src, dst);
    plan = core::plan_copy(topo_, comm_, op.copy_kind, src, dst, static_cast<double>(op.bytes));
    ends.push_back(op.gpu);
    if (op.copy_kind == core::CopyKind::kPeer) ends.push_back(op.peer_gpu);
  } else {
    ends = p_.groups[static_cast<std::size_t>(op.group)].gpus;
    plan = core::plan_collective(topo_, comm_, op.collective, op.algo, ends, op.root,
                                 static_cast<double>(op.bytes));
  }
  const TimeNs d = time_plan(std::move(plan), ends);
  transfer_ns_.emplace(key, d);
  return d;
}

// The mirrors whose images of `gpus` differ from the set and from each other (as the op-level
// simulator's distinct_mirrors, docs/cost-model.md "Rank symmetry").
const std::vector<int>& Schedule::mirrors_of(const std::vector<int>& gpus) {
  auto it = mirrors_.find(gpus);
  if (it != mirrors_.end()) return it->second;
  std::vector<int> out;
  std::set<std::vector<int>> seen;
  for (std::size_t m = 0; m < p_.symmetry.images.size(); ++m) {
    std::vector<int> key;
    for (int g : gpus) key.push_back(p_.symmetry.images[m][static_cast<std::size_t>(g)]);
    std::sort(key.begin(), key.end());
    if (!seen.insert(key).second) continue;
    if (m > 0) out.push_back(static_cast<int>(m));
  }
  return mirrors_.emplace(gpus, std::move(out)).first->second;
}

void Schedule::add_mirror_flows(core::TransferPlan& plan, const std::vector<int>& mirrors) const {
  for (core::TransferPlan& st : plan.then) add_mirror_flows(st, mirrors);
  const std::size_t own = plan.flows.size();
  const int per_node = s_.cluster.gpus_per_node;
  for (int m : mirrors) {
    const std::vector<int>& img = p_.symmetry.images[static_cast<std::size_t>(m)];
    for (std::size_t i = 0; i < own; ++i) {
      core::FlowSpec f = plan.flows[i];
      const bool src_gpu = f.src.kind == core::Endpoint::Kind::kGpu;
      const bool dst_gpu = f.dst.kind == core::Endpoint::Kind::kGpu;
      if (src_gpu) f.src.index = img[static_cast<std::size_t>(f.src.index)];
      if (dst_gpu) f.dst.index = img[static_cast<std::size_t>(f.dst.index)];
      if (!src_gpu && dst_gpu) f.src.index = f.dst.index / per_node;
      if (src_gpu && !dst_gpu) f.dst.index = f.src.index / per_node;
      plan.flows.push_back(f);
    }
  }
}

TimeNs Schedule::time_plan(core::TransferPlan plan, const std::vector<int>& mirror_gpus) {
  if (p_.symmetry.enabled()) add_mirror_flows(plan, mirrors_of(mirror_gpus));
  std::vector<core::TransferPlan> stages{plan};
  for (core::TransferPlan& st : plan.then) stages.push_back(st);
  const TimeNs begin = flow_clock_;
  std::vector<engine::FlowStart> batch;
  for (const core::TransferPlan& st : stages) {
    flow_clock_ += st.latency_ns;
    batch.clear();
    for (const core::FlowSpec& f : st.flows) {
      if (f.bytes <= 0) continue;
      const std::vector<core::LinkId>& route = topo_.route(f.src, f.dst);
      batch.push_back({{route.begin(), route.end()}, f.bytes, f.rate_cap_bytes_per_s, 0});
    }
    if (batch.empty()) continue;
    flows_.start_batch(flow_clock_, batch);
    while (flows_.active() > 0) {
      flow_clock_ = std::max(flow_clock_, flows_.next_completion_ns());
      flows_.advance(flow_clock_);
    }
  }
  return flow_clock_ - begin;
}

// [SECTION] Host ---------------------------------------------------------------------------------

// docs/program.md, "Execution semantics" 1-3: a thread issues its ops in order, python then
// dispatch per op, after its host waits; a GPU op may start a launch latency after its issue
// (allocations and frees: at issue). The block path runs only where no thread waits for the GIL
// or a core (block_path_unsupported), so a thread's clock is its own.
void Schedule::advance_thread(int t) {
  std::vector<OpId>& ops = thread_ops_[static_cast<std::size_t>(t)];
  std::size_t& pos = thread_pos_[static_cast<std::size_t>(t)];
  TimeNs& clock = thread_t_[static_cast<std::size_t>(t)];
  clock = std::max(clock, now_);
  const TimeNs latency = us_to_ns(s_.host.launch_latency_us);
  while (pos < ops.size()) {
    const Op& op = p_.ops[static_cast<std::size_t>(ops[pos])];
    TimeNs ready = clock;
    for (const core::Dep& d : op.deps) {
      if (d.kind != core::DepKind::kHostWaits) continue;
      const TimeNs e = target_end_[static_cast<std::size_t>(target_of_op_[static_cast<std::size_t>(d.op)])];
      if (e < 0 || e > now_) return;  // woken by kThreadResume when it ends
      ready = std::max(ready, e);
    }
    const int gpu = p_.threads[static_cast<std::size_t>(t)].gpu;
    if (op.step >= 1 && gpu >= 0 && step_begin_[static_cast<std::size_t>(gpu)] < 0)
      step_begin_[static_cast<std::size_t>(gpu)] = ready;  // docs/summary.md, "Steps"
    const TimeNs issue_end = ready + op.python_ns + op.dispatch_ns;
    clock = issue_end;
    ++pos;
    if (op.stream < 0) {  // host work and markers end when issued
      if (op.step >= 1 && gpu >= 0)
        step_end_[static_cast<std::size_t>(gpu)] = std::max(step_end_[static_cast<std::size_t>(gpu)], issue_end);
      if (target_of_op_[static_cast<std::size_t>(op.id)] >= 0) {
        target_end_[static_cast<std::size_t>(target_of_op_[static_cast<std::size_t>(op.id)])] = issue_end;
        push(issue_end, Ev::kHostDone, op.id);
      }
      continue;
    }
    const bool launched = op.kind != OpKind::kAlloc && op.kind != OpKind::kFree;
    const int slot = slot_of_op_[static_cast<std::size_t>(op.id)];
    slot_earliest_[static_cast<std::size_t>(slot)] = issue_end + (launched ? latency : 0);
    const int u = unit_of_op_[static_cast<std::size_t>(op.id)];
    if (slot + 1 == units_[static_cast<std::size_t>(u)].end) {
      ++stream_enqueued_[static_cast<std::size_t>(op.stream)];
      push(now_, Ev::kStreamCheck, op.stream);
    }
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
  if (stream_busy_[static_cast<std::size_t>(s)]) return;
  const std::vector<int>& list = stream_units_[static_cast<std::size_t>(s)];
  std::size_t& next = stream_next_[static_cast<std::size_t>(s)];
  if (next >= list.size() || static_cast<int>(next) >= stream_enqueued_[static_cast<std::size_t>(s)]) return;
  const int u = list[next];
  const Unit& un = units_[static_cast<std::size_t>(u)];
  const TimeNs earliest = slot_earliest_[static_cast<std::size_t>(un.first)];
  if (now_ < earliest) {
    push(earliest, Ev::kStreamCheck, s);
    return;
  }
  const Op& head = p_.ops[static_cast<std::size_t>(slot_op_[static_cast<std::size_t>(un.first)])];
  for (const core::Dep& d : head.deps) {
    if (d.kind != core::DepKind::kStreamWaits) continue;
    const TimeNs e = target_end_[static_cast<std::size_t>(target_of_op_[static_cast<std::size_t>(d.op)])];
    if (e < 0 || e > now_) return;  // woken when it ends
  }
  ++next;
  stream_busy_[static_cast<std::size_t>(s)] = 1;
  start_unit(u);
}

// A chain's op times from slot `from` on, starting at t0 at the chain's current factor; each op
// starts when the one before it ended and not before its launch (docs/program.md 3). Returns the
// chain's end.
TimeNs Schedule::walk(Unit& u, int from, TimeNs t0) {
  TimeNs t = t0;
  const double f = u.factor;
  for (int j = from; j < u.end; ++j) {
    t = std::max(t, slot_earliest_[static_cast<std::size_t>(j)]);
    slot_start_[static_cast<std::size_t>(j)] = t;
    const TimeNs d = slot_dur_[static_cast<std::size_t>(j)];
    if (slot_piece_[static_cast<std::size_t>(j)] == Piece::kCompute) {
      t += f == 1.0 ? d : static_cast<TimeNs>(std::llround(static_cast<double>(d) * f));
    } else {
      t += d;
    }
  }
  return t;
}

void Schedule::start_unit(int ui) {
  Unit& u = units_[static_cast<std::size_t>(ui)];
  u.start_ns = now_;
  if (u.kind == UnitKind::kChain) {
    u.seg_pos = u.first;
    u.factor = factor(u.gpu);
    const TimeNs end = walk(u, u.first, now_);
    if (u.has_compute) running_chain_[static_cast<std::size_t>(u.gpu)] = ui;
    push(end, Ev::kChainDone, ui, ++u.gen);
    return;
  }
  slot_start_[static_cast<std::size_t>(u.first)] = now_;
  const Op& op = p_.ops[static_cast<std::size_t>(slot_op_[static_cast<std::size_t>(u.first)])];
  if (u.kind == UnitKind::kCopy) {
    push(now_ + u.transfer_ns, Ev::kTransferDone, ui);
    return;
  }
  // docs/program.md 4: a collective moves data once every member has started; each member's
  // kernel holds its SMs from its own start.
  sms_change(u.gpu, sms_of(op));
  if (op.fixed_ns >= 0) {
    push(now_ + u.transfer_ns, Ev::kTransferDone, ui);
    return;
  }
  const std::size_t in = static_cast<std::size_t>(op.instance);
  inst_units_[in].push_back(ui);
  inst_last_[in] = now_;
  if (++inst_arrived_[in] == inst_expected_[in]) push(now_ + u.transfer_ns, Ev::kTransferDone, -1 - static_cast<std::int64_t>(in));
}

// docs/block-eval.md, "Re-rating": when the NCCL SMs of a GPU change, the kernels of its running
// chain that have not started yet take the new factor; the one running keeps its duration.
void Schedule::rerate(int gpu) {
  const int ui = running_chain_[static_cast<std::size_t>(gpu)];
  if (ui < 0) return;
  Unit& u = units_[static_cast<std::size_t>(ui)];
  const double f = factor(gpu);
  if (f == u.factor) return;
  // First slot of the segment starting after now.
  int j = u.seg_pos;
  while (j < u.end && slot_start_[static_cast<std::size_t>(j)] <= now_) ++j;
  if (j == u.end) {
    u.factor = f;
    return;
  }
  TimeNs t0 = slot_start_[static_cast<std::size_t>(j)];
  if (j > u.seg_pos) {
    const int k = j - 1;
    const TimeNs d = slot_dur_[static_cast<std::size_t>(k)];
    t0 = slot_start_[static_cast<std::size_t>(k)] +
         (slot_piece_[static_cast<std::size_t>(k)] == Piece::kCompute && u.factor != 1.0
              ? static_cast<TimeNs>(std::llround(static_cast<double>(d) * u.factor))
              : d);
  }
  u.seg_pos = j;
  u.factor = f;
  const TimeNs end = walk(u, j, t0);
  push(end, Ev::kChainDone, ui, ++u.gen);
}

void Schedule::sms_change(int gpu, int delta) {
  comm_sms_[static_cast<std::size_t>(gpu)] += delta;
  rerate(gpu);
}

void Schedule::target_done(OpId op, TimeNs t) {
  const int k = target_of_op_[static_cast<std::size_t>(op)];
  if (k < 0) return;
  target_end_[static_cast<std::size_t>(k)] = t;
  for (int s : target_streams_[static_cast<std::size_t>(k)]) push(t, Ev::kStreamCheck, s);
  for (int th : target_threads_[static_cast<std::size_t>(k)]) push(t, Ev::kThreadResume, th);
}

void Schedule::finish_unit(int ui, TimeNs end) {
  Unit& u = units_[static_cast<std::size_t>(ui)];
  u.end_ns = end;
  const std::size_t g = static_cast<std::size_t>(u.gpu);
  if (u.kind == UnitKind::kChain) {
    if (running_chain_[g] == ui) running_chain_[g] = -1;
    for (int j = u.first; j < u.end; ++j)
      if (slot_piece_[static_cast<std::size_t>(j)] == Piece::kMem)
        mem_.push_back({slot_start_[static_cast<std::size_t>(j)], slot_op_[static_cast<std::size_t>(j)]});
  } else if (u.kind == UnitKind::kComm) {
    const Op& op = p_.ops[static_cast<std::size_t>(slot_op_[static_cast<std::size_t>(u.first)])];
    sms_change(u.gpu, -sms_of(op));
  }
  if (u.step >= 1) {
    step_end_[g] = std::max(step_end_[g], end);
    if (u.kind == UnitKind::kChain && u.has_compute) {
      inline_comm_[g] += u.comm_ns;
      busy_[g].push_back({u.start_ns, end});
    } else if (u.kind != UnitKind::kCopy) {
      comm_iv_[g].push_back({u.start_ns, end});
    }
  }
  stream_busy_[static_cast<std::size_t>(u.stream)] = 0;
  push(end, Ev::kStreamCheck, u.stream);
  target_done(slot_op_[static_cast<std::size_t>(u.end - 1)], end);
}

EvalResult Schedule::run() {
  build();
  const std::size_t gpus = static_cast<std::size_t>(p_.world_gpus);
  stream_next_.assign(p_.streams.size(), 0);
  stream_busy_.assign(p_.streams.size(), 0);
  stream_enqueued_.assign(p_.streams.size(), 0);
  running_chain_.assign(gpus, -1);
  comm_sms_.assign(gpus, 0);
  step_begin_.assign(gpus, -1);
  step_end_.assign(gpus, -1);
  inline_comm_.assign(gpus, 0);
  busy_.assign(gpus, {});
  comm_iv_.assign(gpus, {});
  thread_pos_.assign(p_.threads.size(), 0);
  thread_t_.assign(p_.threads.size(), 0);
  for (std::size_t t = 0; t < p_.threads.size(); ++t) push(0, Ev::kThreadResume, static_cast<std::int64_t>(t));
  while (!q_.empty()) {
    const Event ev = q_.pop(&now_);
    switch (ev.type) {
      case Ev::kStreamCheck:
        check_stream(static_cast<int>(ev.a));
        break;
      case Ev::kThreadResume:
        advance_thread(static_cast<int>(ev.a));
        break;
      case Ev::kHostDone:
        target_done(static_cast<OpId>(ev.a), now_);
        break;
      case Ev::kChainDone:
        if (units_[static_cast<std::size_t>(ev.a)].gen == ev.gen) finish_unit(static_cast<int>(ev.a), now_);
        break;
      case Ev::kTransferDone:
        if (ev.a >= 0) {
          finish_unit(static_cast<int>(ev.a), now_);
        } else {
          const std::size_t in = static_cast<std::size_t>(-1 - ev.a);
          for (int u : inst_units_[in]) finish_unit(u, now_);
        }
        break;
    }
  }
  for (std::size_t t = 0; t < thread_ops_.size(); ++t)
    if (thread_pos_[t] < thread_ops_[t].size()) std::fprintf(stderr, "thread %zu at %zu/%zu op %d\n", t, thread_pos_[t], thread_ops_[t].size(), thread_ops_[t][thread_pos_[t]]);
  for (std::size_t s = 0; s < stream_units_.size(); ++s) {
    if (stream_next_[s] < stream_units_[s].size()) {
      const Unit& u = units_[stream_units_[s][stream_next_[s]]];
      const Op& h = p_.ops[static_cast<std::size_t>(slot_op_[static_cast<std::size_t>(u.first)])];
      std::fprintf(stderr, "stuck stream %zu unit kind %d head op %d '%s' enq %d next %zu busy %d deps:", s, (int)u.kind, h.id, h.name.c_str(), stream_enqueued_[s], stream_next_[s], stream_busy_[s]);
      for (auto& d : h.deps) std::fprintf(stderr, " %d(%d,end %lld)", d.op, (int)d.kind, (long long)target_end_[target_of_op_[d.op]]);
      std::fprintf(stderr, "\n");
      std::fprintf(stderr, "  units %zu; unit slots %d..%d ops %d..%d earliest %lld\n", stream_units_[s].size(), u.first, u.end, slot_op_[u.first], slot_op_[u.end-1], (long long)slot_earliest_[u.first]);
    }
  }
  for (std::size_t s = 0; s < stream_units_.size(); ++s)
    CSIM_ASSERT_MSG(stream_next_[s] == stream_units_[s].size() && !stream_busy_[s],
                    "block schedule deadlock");
  return figures();
}

// [SECTION] Figures ------------------------------------------------------------------------------

// |a \ b| for interval lists (docs/block-eval.md, "Exposed communication"), within [lo, hi].
TimeNs minus_measure(std::vector<std::pair<TimeNs, TimeNs>> a, std::vector<std::pair<TimeNs, TimeNs>> b,
                     TimeNs lo, TimeNs hi) {
  struct E {
    TimeNs t;
    int kind, delta;
  };
  std::vector<E> e;
  for (const auto& [x, y] : a)
    if (y > x) e.push_back({x, 0, 1}), e.push_back({y, 0, -1});
  for (const auto& [x, y] : b)
    if (y > x) e.push_back({x, 1, 1}), e.push_back({y, 1, -1});
  std::sort(e.begin(), e.end(), [](const E& p, const E& q) { return p.t < q.t; });
  int act[2] = {0, 0};
  TimeNs out = 0;
  for (std::size_t i = 0; i < e.size();) {
    const TimeNs t = e[i].t;
    while (i < e.size() && e[i].t == t) act[e[i].kind] += e[i].delta, ++i;
    if (i == e.size()) break;
    const TimeNs from = std::max(t, lo), to = std::min(e[i].t, hi);
    if (act[0] > 0 && act[1] == 0 && to > from) out += to - from;
  }
  return out;
}

EvalResult Schedule::figures() const {
  EvalResult r;
  r.path = EvalPath::kBlock;
  r.units = static_cast<std::int64_t>(units_.size());
  r.chains = chains_;
  r.chained_ops = chained_ops_;
  r.transfers_timed = static_cast<std::int64_t>(transfer_ns_.size());
  // docs/summary.md, "Steps" (one step): the latest end over GPUs minus the earliest start.
  TimeNs lo = -1, hi = -1;
  for (int g : p_.active_gpus) {
    const std::size_t k = static_cast<std::size_t>(g);
    if (step_begin_[k] < 0) continue;
    lo = lo < 0 ? step_begin_[k] : std::min(lo, step_begin_[k]);
    hi = std::max(hi, step_end_[k]);
  }
  r.step_time_ns = lo >= 0 ? hi - lo : 0;
  // docs/memory.md, "First-step and steady-state peaks" (one step), as core/memory_timeline.cpp:
  // memory ops by time then op id; the peak, and the steady state projected from step 1.
  std::vector<MemEvent> mem = mem_;
  std::sort(mem.begin(), mem.end(), [](const MemEvent& a, const MemEvent& b) {
    return a.t != b.t ? a.t < b.t : a.op < b.op;
  });
  using ByCategory = std::array<Bytes, core::kNumMemCategories>;
  std::vector<int> index(static_cast<std::size_t>(p_.world_gpus), -1);
  for (int g : p_.active_gpus) {
    if (p_.symmetry.enabled() && p_.symmetry.weight_of_gpu[static_cast<std::size_t>(g)] == 0) continue;
    index[static_cast<std::size_t>(g)] = static_cast<int>(r.peaks.size());
    r.peaks.push_back({g, 0});
  }
  const std::size_t n = r.peaks.size();
  std::vector<ByCategory> cur(n, ByCategory{}), resident(n, ByCategory{});
  std::vector<Bytes> total(n, 0), steady(n, 0);
  for (int pass = 0; pass < 2; ++pass) {
    std::fill(cur.begin(), cur.end(), ByCategory{});
    std::fill(total.begin(), total.end(), 0);
    for (const MemEvent& e : mem) {
      const Op& op = p_.ops[static_cast<std::size_t>(e.op)];
      const int k = index[static_cast<std::size_t>(op.gpu)];
      if (k < 0) continue;
      const std::size_t kk = static_cast<std::size_t>(k);
      const Bytes delta = op.kind == OpKind::kAlloc ? op.bytes : -op.bytes;
      cur[kk][static_cast<int>(op.mem_category)] += delta;
      total[kk] += delta;
      if (pass == 0) {
        r.peaks[kk].peak_bytes = std::max(r.peaks[kk].peak_bytes, total[kk]);
        if (op.step <= 1) resident[kk] = cur[kk];
      } else {
        Bytes lifted = total[kk];
        for (int c = 0; c < core::kNumMemCategories; ++c)
          lifted += std::max<Bytes>(0, resident[kk][static_cast<std::size_t>(c)] - cur[kk][static_cast<std::size_t>(c)]);
        steady[kk] = std::max(steady[kk], lifted);
      }
    }
  }
  for (std::size_t k = 0; k < n; ++k) r.peaks[k].peak_bytes = std::max(r.peaks[k].peak_bytes, steady[k]);
  // docs/block-eval.md, "Exposed communication": a chain with kernels keeps its stream busy from
  // start to end, its collectives exposed; other communication counts where no chain runs.
  TimeNs exposed = 0;
  for (const GpuPeak& pk : r.peaks) {
    const std::size_t g = static_cast<std::size_t>(pk.gpu);
    const int w = p_.symmetry.enabled() ? p_.symmetry.weight_of_gpu[g] : 1;
    exposed += w * (inline_comm_[g] + minus_measure(comm_iv_[g], busy_[g], lo, hi));
  }
  r.exposed_comm_ns = exposed;
  return r;
}

}  // namespace

EvalResult run_block_schedule(const core::Scenario& scenario, const core::Program& program) {
  Schedule s(scenario, program);
  return s.run();
}

}  // namespace csim::block
