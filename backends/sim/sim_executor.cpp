// Discrete-event execution of a Program (docs/cost-model.md, "Simulation").
//
// [SECTION] index
//   Run state         threads, streams, transfers, resources
//   Host side         issuing ops: host waits -> GIL -> core -> Python -> dispatch -> enqueue
//   Device side       stream heads: launch latency, stream waits, compute / copy / collective
//   Transfers         latency, then flows in the FlowNetwork; completion ends the ops
//   Event loop        (time, insertion order) queue; deadlock and cancellation checks
#include "backends/sim/sim_executor.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "backends/sim/alloc_backpressure.hpp"
#include "backends/sim/copy_engines.hpp"
#include "backends/sim/host_model.hpp"
#include "backends/sim/resources.hpp"
#include "backends/sim/wait_lists.hpp"
#include "core/cost/compute_cost.hpp"
#include "core/cost/hbm_traffic.hpp"
#include "core/engine/event_queue.hpp"
#include "core/engine/flow_network.hpp"
#include "core/error.hpp"
#include "core/hardware/topology.hpp"

namespace csim::sim {
namespace {

using core::Dep;
using core::DepKind;
using core::Op;
using core::OpId;
using core::OpKind;

enum class EvType : std::uint8_t {
  kThreadStep,
  kPythonDone,
  kDispatchDone,
  kStreamCheck,
  kComputeDone,
  kTransferGo,
  kFlowCheck
};

struct Event {
  EvType type;
  std::int64_t subject;  // thread, stream, op, transfer or flow generation, by type
};

enum class ThreadPhase : std::uint8_t {
  kIdle,
  kBlocked,
  kWaitGil,
  kWaitCore,
  kPython,
  kDispatch,
  kDone
};

struct ThreadState {
  std::vector<OpId> ops;  // issue order
  std::size_t pos = 0;
  ThreadPhase phase = ThreadPhase::kIdle;
  int process = 0, node = 0;
  bool holds_gil = false, holds_core = false;
};

// Ops enqueued on a stream and not started, FIFO by enqueue: a vector read from `head`, emptied
// whenever it drains (streams drain often), so a push allocates nothing once it has grown.
struct StreamQueue {
  std::vector<OpId> ops;
  std::size_t head = 0;
  bool empty() const { return head == ops.size(); }
  OpId front() const { return ops[head]; }
  void push_back(OpId id) { ops.push_back(id); }
  void pop_front() {
    if (++head == ops.size()) {
      ops.clear();
      head = 0;
    }
  }
};

struct StreamState {
  StreamQueue queue;
  OpId running = core::kNoOp;
};

// One stage of a plan, ready for the flow network: its latency, then its flows (those with bytes)
// as a batch registered once per plan, routes borrowed from the Topology (whose routes never move).
struct Stage {
  TimeNs latency_ns = 0;
  engine::FlowNetwork::BatchId batch = -1;
  int flow_count = 0;
};
// A plan's stages flattened (TransferPlan::then), mirror images included: run one after the other;
// and the HBM bytes/ns the transfer moves on each GPU taking part while it runs
// (docs/cost-model.md, "Resource sharing").
struct Stages {
  std::vector<Stage> stages;
  double hbm_bytes_per_ns = 0;
  // A collective's: what plan_collective chose (recorded in each member's OpTiming).
  core::CollectiveAlgo algo = core::CollectiveAlgo::kAuto;
  core::NcclProto proto = core::NcclProto::kAuto;
};

struct Transfer {
  // Ops that end when the transfer ends: a copy's one op, or a collective instance's members.
  OpId op = core::kNoOp;
  int instance = -1;
  const Stages* stages = nullptr;  // in SimRun::plans_ (its nodes never move)
  std::size_t stage = 0;
  int flows_left = 0;
};

// What a transfer's plan depends on: (0 = copy: copy kind, GPU, peer; 1 = collective: kind,
// algorithm, group, root) and the bytes. Plans are pure functions of these, so each is built once.
using PlanKey = std::tuple<int, int, int, int, int, Bytes>;

struct Instance {
  std::vector<OpId> arrived;
  int expected = 0;
};

class SimRun {
 public:
  SimRun(const core::Scenario& s, const core::CommParams& comm, const core::Program& p,
         const core::RunControl& ctl)
      : scenario_(s),
        comm_(comm),
        program_(p),
        ctl_(ctl),
        topo_(s.cluster),
        copy_engines_(topo_),
        flows_(copy_engines_.links()) {}

  core::ExecutionResult run();

 private:
  // [SECTION] Run state
  const core::Scenario& scenario_;
  const core::CommParams& comm_;
  const core::Program& program_;
  const core::RunControl& ctl_;
  core::Topology topo_;
  CopyEngines copy_engines_;  // the topology's links and each GPU's two copy engines
  engine::FlowNetwork flows_;
  std::deque<std::vector<core::LinkId>> engine_routes_;  // copy routes through a copy engine
  engine::EventQueue<Event> queue_;
  TimeNs now_ = 0;
  std::vector<core::OpTiming> timings_;
  std::vector<char> done_;
  std::vector<TimeNs> earliest_;             // earliest device start (issue end + launch latency)
  WaitLists host_waiters_, stream_waiters_;  // by op: threads / streams waiting for it
  std::vector<ThreadState> threads_;
  std::vector<StreamState> streams_;
  std::vector<FifoResource> gil_, cores_;
  std::vector<Instance> instances_;
  std::vector<Transfer> transfers_;
  std::vector<std::vector<int>> group_mirrors_;  // per group: mirrors giving distinct images
  std::vector<char> group_mirrors_known_;
  std::map<std::vector<int>, std::vector<int>> copy_mirrors_;  // by the copy's GPUs
  std::map<PlanKey, Stages> plans_;
  std::int64_t flow_gen_ = 0;
  std::int64_t events_ = 0;
  std::int64_t done_count_ = 0;
  std::int64_t issued_ = 0;         // ops their host thread finished issuing (progress only)
  AllocBackpressure backpressure_;  // docs/memory.md, "Allocation backpressure"
  core::OpComputeMemo kernel_ns_;   // scenario_.cluster.gpu's kernel times, remembered

  void push(TimeNs t, EvType type, std::int64_t subject) { queue_.push(t, Event{type, subject}); }
  void prepare_ops();
  void step_thread(int t);
  void finish_issue(int t);
  void check_stream(int s);
  void start_on_stream(int s, OpId id);
  const Stages& copy_plan(const Op& op);
  const Stages& collective_plan(const Op& op);
  void start_transfer(OpId op, int instance, const Stages& stages);
  std::vector<int> distinct_mirrors(const std::vector<int>& gpus) const;
  const std::vector<int>& mirrors_of_group(int group);
  const std::vector<int>& mirrors_of_gpus(const std::vector<int>& gpus);  // copies, cached
  void add_mirror_flows(core::TransferPlan& plan, const std::vector<int>& mirrors) const;
  void transfer_go(int tr);
  void stage_done(int tr);
  void on_flow_check(std::int64_t gen);
  void schedule_flow_check();
  void advance_flows();
  bool wants_step(int t) const;
  void complete(OpId id);
  bool process_has_gil(int process) const { return program_.processes[process].has_gil; }
  // docs/cost-model.md, "Resource sharing": kernels share their GPU's SMs and HBM with the NCCL
  // kernels and DMA copies there (DeviceShares); a re-rated kernel's older events are dropped by
  // generation. Starts kernel `id` of model duration `d` moving `hbm_bytes` on `gpu`.
  void start_kernel(OpId id, int gpu, TimeNs d, double hbm_bytes) {
    push(shares_.start_kernel(id, gpu, now_, d, hbm_bytes), EvType::kComputeDone, id);
    push_moved();
  }
  void set_holder(OpId id, int gpu, int sms, double hbm_bytes_per_ns) {
    shares_.set_holder(id, gpu, now_, sms, hbm_bytes_per_ns);
    push_moved();
  }
  void push_moved() {
    for (const DeviceShares::Moved& m : shares_.moved())
      push(m.end_ns, EvType::kComputeDone,
           static_cast<std::int64_t>(m.op) | std::int64_t{m.generation} << 32);
  }
  DeviceShares shares_;
  // SMs a communication kernel holds (core::comm_kernel_sms).
  int sms_of(const Op& op) const {
    return core::comm_kernel_sms(
        scenario_.cluster.gpu,
        op.group >= 0 ? &program_.groups[static_cast<std::size_t>(op.group)] : nullptr, op);
  }
  // A DMA copy's GPUs: its own, and a peer copy's source.
  void set_copy_traffic(const Op& op, double hbm_bytes_per_ns) {
    set_holder(op.id, op.gpu, 0, hbm_bytes_per_ns);
    if (op.copy_kind == core::CopyKind::kPeer && op.peer_gpu != op.gpu)
      set_holder(op.id, op.peer_gpu, 0, hbm_bytes_per_ns);
  }
  std::string describe_stuck() const;
};

// [SECTION] Host side ----------------------------------------------------------------------------

void SimRun::step_thread(int t) {
  ThreadState& th = threads_[t];
  while (th.pos < th.ops.size()) {
    const OpId id = th.ops[th.pos];
    const Op& op = program_.ops[id];
    core::OpTiming& tm = timings_[id];
    if (th.phase == ThreadPhase::kIdle || th.phase == ThreadPhase::kBlocked) {
      // Host waits: the thread cannot issue this op before its dependencies finished.
      for (const Dep& d : op.deps) {
        if (d.kind == DepKind::kHostWaits && !done_[d.op]) {
          host_waiters_.add(d.op, t);
          th.phase = ThreadPhase::kBlocked;
          return;
        }
      }
      // docs/memory.md, "Allocation backpressure": an alloc that does not fit waits for the
      // pending cross-stream frees (the caching allocator's retry synchronizes on their events).
      if (op.kind == OpKind::kAlloc) {
        const OpId w = backpressure_.wait_before(t, op, done_);
        if (w != core::kNoOp) {
          host_waiters_.add(w, t);
          th.phase = ThreadPhase::kBlocked;
          return;
        }
      }
      tm.ready_ns = now_;
      th.phase = ThreadPhase::kWaitGil;
      if (op.python_ns > 0 && process_has_gil(th.process)) {
        if (!gil_[th.process].acquire(t)) return;  // granted later through release()
      }
      th.holds_gil = op.python_ns > 0 && process_has_gil(th.process);
    }
    if (th.phase == ThreadPhase::kWaitGil) {
      tm.gil_wait_ns = now_ - tm.ready_ns;
      th.phase = ThreadPhase::kWaitCore;
      if (op.python_ns + op.dispatch_ns > 0) {
        if (!cores_[th.node].acquire(t)) return;
        th.holds_core = true;
      }
    }
    if (th.phase == ThreadPhase::kWaitCore) {
      tm.core_wait_ns = now_ - tm.ready_ns - tm.gil_wait_ns;
      if (op.kind == OpKind::kHostWork) tm.start_ns = now_;
      th.phase = ThreadPhase::kPython;
      if (op.python_ns > 0) {
        push(now_ + op.python_ns, EvType::kPythonDone, t);
        return;
      }
    }
    if (th.phase == ThreadPhase::kPython) {
      if (th.holds_gil) {
        th.holds_gil = false;
        const int next = gil_[th.process].release();
        if (next >= 0) {
          threads_[next].holds_gil = true;
          push(now_, EvType::kThreadStep, next);
        }
      }
      th.phase = ThreadPhase::kDispatch;
      if (op.dispatch_ns > 0) {
        push(now_ + op.dispatch_ns, EvType::kDispatchDone, t);
        return;
      }
    }
    if (th.phase == ThreadPhase::kDispatch) {
      finish_issue(t);
      th.phase = ThreadPhase::kIdle;
      ++th.pos;
    }
  }
  th.phase = ThreadPhase::kDone;
}

void SimRun::finish_issue(int t) {
  ThreadState& th = threads_[t];
  const OpId id = th.ops[th.pos];
  const Op& op = program_.ops[id];
  if (th.holds_core) {
    th.holds_core = false;
    const int next = cores_[th.node].release();
    if (next >= 0) {
      threads_[next].holds_core = true;
      push(now_, EvType::kThreadStep, next);
    }
  }
  timings_[id].issue_end_ns = now_;
  ++issued_;
  if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) backpressure_.on_issue(op);
  if (op.stream < 0) {
    // Host work and markers execute on the thread itself.
    if (op.kind == OpKind::kMarker) timings_[id].start_ns = now_;
    complete(id);
    return;
  }
  // docs/cost-model.md, "Kernel start": a kernel starts at max(stream free, enqueue + launch
  // latency). Memory operations are stream-ordered bookkeeping with no launch.
  const bool launched = op.kind != OpKind::kAlloc && op.kind != OpKind::kFree;
  earliest_[id] = now_ + (launched ? us_to_ns(scenario_.host.launch_latency_us) : 0);
  streams_[op.stream].queue.push_back(id);
  check_stream(op.stream);
}

// [SECTION] Device side --------------------------------------------------------------------------

void SimRun::check_stream(int s) {
  StreamState& st = streams_[s];
  while (st.running == core::kNoOp && !st.queue.empty()) {
    const OpId id = st.queue.front();
    if (now_ < earliest_[id]) {
      push(earliest_[id], EvType::kStreamCheck, s);
      return;
    }
    for (const Dep& d : program_.ops[id].deps) {
      if (d.kind == DepKind::kStreamWaits && !done_[d.op]) {
        stream_waiters_.add(d.op, s);
        return;
      }
    }
    st.queue.pop_front();
    start_on_stream(s, id);
  }
}

void SimRun::start_on_stream(int s, OpId id) {
  const Op& op = program_.ops[id];
  StreamState& st = streams_[s];
  timings_[id].start_ns = now_;
  switch (op.kind) {
    case OpKind::kAlloc:
    case OpKind::kFree:
      complete(id);  // bookkeeping only; memory_timeline reads the time
      return;
    case OpKind::kCompute: {
      st.running = id;
      if (op.fixed_ns >= 0) {
        // A measured kernel (docs/replay.md, "Durations"): its duration already holds whatever
        // shared the GPU with it when it was measured, so it takes no share of the SMs or HBM.
        push(now_ + op.fixed_ns, EvType::kComputeDone, id);
        return;
      }
      start_kernel(id, op.gpu, kernel_ns_.get(scenario_.cluster.gpu, op),
                   static_cast<double>(op.bytes));
      return;
    }
    case OpKind::kCopy: {
      st.running = id;
      if (op.fixed_ns >=
          0) {  // simulated elsewhere (core/program/program_slice.hpp): a fixed delay
        push(now_ + op.fixed_ns, EvType::kComputeDone, id);
        return;
      }
      if (op.copy_kind == core::CopyKind::kD2D) {
        // On-device copy: a memory-bound kernel reading and writing the bytes (docs/cost-model.md,
        // "Copies").
        start_kernel(
            id, op.gpu,
            core::compute_duration_ns(scenario_.cluster.gpu, core::ComputeKind::kElementwise,
                                      core::Dtype::kFp32, 0, 2 * op.bytes),
            2.0 * static_cast<double>(op.bytes));
        return;
      }
      const Stages& plan = copy_plan(op);
      set_copy_traffic(op, plan.hbm_bytes_per_ns);
      start_transfer(id, -1, plan);
      return;
    }
    case OpKind::kCollective: {
      st.running = id;
      set_holder(id, op.gpu, sms_of(op), 0);  // it spins on its SMs until the data moves
      if (op.fixed_ns >=
          0) {  // simulated elsewhere (core/program/program_slice.hpp): a fixed delay
        push(now_ + op.fixed_ns, EvType::kComputeDone, id);
        return;
      }
      Instance& in = instances_[op.instance];
      in.arrived.push_back(id);
      // NCCL: each GPU's kernel starts (and spins) when its stream reaches it; data moves only
      // once every member has arrived.
      if (static_cast<int>(in.arrived.size()) == in.expected) {
        const Stages& plan = collective_plan(op);
        for (OpId m : in.arrived) {
          const Op& mo = program_.ops[m];
          set_holder(m, mo.gpu, sms_of(mo), plan.hbm_bytes_per_ns);
          timings_[m].algo = plan.algo;
          timings_[m].proto = plan.proto;
        }
        start_transfer(core::kNoOp, op.instance, plan);
      }
      return;
    }
    case OpKind::kHostWork:
    case OpKind::kMarker:
      break;
  }
  CSIM_ASSERT_MSG(false, "host op on a stream");
}

// [SECTION] Transfers ----------------------------------------------------------------------------

// The plan and its `then` stages as one list, each stage's flows registered with the flow network
// once (routes looked up once, isolated-start rates precomputed).
// `route_of` gives each flow's route (a copy's passes through a copy engine).
template <typename RouteOf>
Stages flatten(engine::FlowNetwork& net, const core::TransferPlan& plan, RouteOf&& route_of) {
  Stages out;
  std::vector<engine::FlowStartRef> flows;
  auto add = [&](const core::TransferPlan& st) {
    Stage& stage = out.stages.emplace_back();
    stage.latency_ns = st.latency_ns;
    flows.clear();
    for (const core::FlowSpec& f : st.flows) {
      if (f.bytes <= 0) continue;
      flows.push_back({route_of(f), f.bytes, f.rate_cap_bytes_per_s});
    }
    stage.batch = net.register_batch(flows);
    stage.flow_count = static_cast<int>(flows.size());
  };
  add(plan);
  for (const core::TransferPlan& st : plan.then) add(st);
  return out;
}

const Stages& SimRun::copy_plan(const Op& op) {
  const PlanKey key{0, static_cast<int>(op.copy_kind), op.gpu, op.peer_gpu, 0, op.bytes};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const int node = op.gpu / scenario_.cluster.gpus_per_node;
  core::Endpoint src = core::Endpoint::host(node), dst = core::Endpoint::gpu(op.gpu);
  if (op.copy_kind == core::CopyKind::kPeer) src = core::Endpoint::gpu(op.peer_gpu);
  if (op.copy_kind == core::CopyKind::kD2H) std::swap(src, dst);
  core::TransferPlan plan =
      core::plan_copy(topo_, comm_, op.copy_kind, src, dst, static_cast<double>(op.bytes));
  if (program_.symmetry.enabled()) {
    std::vector<int> ends{op.gpu};
    if (op.copy_kind == core::CopyKind::kPeer) ends.push_back(op.peer_gpu);
    add_mirror_flows(plan, mirrors_of_gpus(ends));
  }
  // docs/cost-model.md, "Resource sharing": a host copy's flows cross its GPU's copy engine for
  // the direction (H2D: into the GPU, D2H: out of it); its DMA reads or writes each byte of HBM
  // once, spread over the plan's uncontended time.
  auto route_of = [this](const core::FlowSpec& f) -> std::span<const core::LinkId> {
    const std::vector<core::LinkId>& r = topo_.route(f.src, f.dst);
    const bool src_gpu = f.src.kind == core::Endpoint::Kind::kGpu;
    const bool dst_gpu = f.dst.kind == core::Endpoint::Kind::kGpu;
    if (src_gpu == dst_gpu) return r;
    std::vector<core::LinkId>& own = engine_routes_.emplace_back();
    if (src_gpu) own.push_back(copy_engines_.d2h(f.src.index));
    own.insert(own.end(), r.begin(), r.end());
    if (dst_gpu) own.push_back(copy_engines_.h2d(f.dst.index));
    return own;
  };
  Stages st = flatten(flows_, plan, route_of);
  if (plan.predicted_ns > 0)
    st.hbm_bytes_per_ns = static_cast<double>(op.bytes) / static_cast<double>(plan.predicted_ns);
  return plans_.emplace(key, std::move(st)).first->second;
}

const Stages& SimRun::collective_plan(const Op& op) {
  const PlanKey key{
      1, static_cast<int>(op.collective), static_cast<int>(op.algo), op.group, op.root, op.bytes};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const core::CommGroup& g = program_.groups[op.group];
  core::TransferPlan plan =
      core::plan_collective(topo_, comm_, op.collective, op.algo, g.gpus, op.root,
                            static_cast<double>(op.bytes), &g.a2a_shares);
  if (program_.symmetry.enabled()) add_mirror_flows(plan, mirrors_of_group(op.group));
  Stages st =
      flatten(flows_, plan, [this](const core::FlowSpec& f) -> std::span<const core::LinkId> {
        return topo_.route(f.src, f.dst);
      });
  st.algo = plan.algo;
  st.proto = plan.proto;
  // docs/cost-model.md, "Resource sharing": the HBM bytes a member's NCCL kernel moves, spread
  // over the plan's uncontended time.
  if (plan.predicted_ns > 0)
    st.hbm_bytes_per_ns =
        core::nccl_hbm_bytes(op.collective, plan.algo, static_cast<int>(g.gpus.size()),
                             static_cast<double>(op.bytes)) /
        static_cast<double>(plan.predicted_ns);
  return plans_.emplace(key, std::move(st)).first->second;
}

void SimRun::start_transfer(OpId op, int instance, const Stages& stages) {
  const int tr = static_cast<int>(transfers_.size());
  transfers_.push_back(Transfer{op, instance, &stages, 0, 0});
  push(now_ + stages.stages.front().latency_ns, EvType::kTransferGo, tr);
}

// Rank symmetry (docs/cost-model.md, "Rank symmetry"): the mirrors whose images of `gpus` differ
// from the set itself and from each other, so that each image transfer is started once.
std::vector<int> SimRun::distinct_mirrors(const std::vector<int>& gpus) const {
  std::vector<int> out;
  std::set<std::vector<int>> seen;
  std::vector<int> key;
  for (std::size_t m = 0; m < program_.symmetry.images.size(); ++m) {
    key.clear();
    for (int g : gpus) key.push_back(program_.symmetry.images[m][g]);
    std::sort(key.begin(), key.end());
    if (!seen.insert(key).second) continue;
    if (m > 0)
      out.push_back(static_cast<int>(m));  // images[0] is the identity: the transfer itself
  }
  return out;
}

const std::vector<int>& SimRun::mirrors_of_gpus(const std::vector<int>& gpus) {
  auto it = copy_mirrors_.find(gpus);
  if (it == copy_mirrors_.end()) it = copy_mirrors_.emplace(gpus, distinct_mirrors(gpus)).first;
  return it->second;
}

const std::vector<int>& SimRun::mirrors_of_group(int group) {
  if (!group_mirrors_known_[group]) {
    group_mirrors_[group] = distinct_mirrors(program_.groups[group].gpus);
    group_mirrors_known_[group] = 1;
  }
  return group_mirrors_[group];
}

// Appends each mirror's image of the plan's flows: GPU endpoints through the mirror's map, a host
// endpoint to the node of its flow's GPU's image. The transfer ends when the slowest image ends.
void SimRun::add_mirror_flows(core::TransferPlan& plan, const std::vector<int>& mirrors) const {
  for (core::TransferPlan& st : plan.then) add_mirror_flows(st, mirrors);
  const std::size_t own = plan.flows.size();
  const int per_node = scenario_.cluster.gpus_per_node;
  for (int m : mirrors) {
    const std::vector<int>& img = program_.symmetry.images[m];
    for (std::size_t i = 0; i < own; ++i) {
      core::FlowSpec f = plan.flows[i];
      const bool src_gpu = f.src.kind == core::Endpoint::Kind::kGpu;
      const bool dst_gpu = f.dst.kind == core::Endpoint::Kind::kGpu;
      if (src_gpu) f.src.index = img[f.src.index];
      if (dst_gpu) f.dst.index = img[f.dst.index];
      if (!src_gpu && dst_gpu) f.src.index = f.dst.index / per_node;
      if (src_gpu && !dst_gpu) f.dst.index = f.src.index / per_node;
      plan.flows.push_back(f);
    }
  }
}

void SimRun::transfer_go(int tr) {
  Transfer& x = transfers_[tr];
  // Bring the flows in flight up to now at their old rates before the set changes.
  advance_flows();
  // One batch: the flow network recomputes rates once for all of them; the routes come from the
  // plan cache, so nothing is copied here.
  const Stage& stage = x.stages->stages[x.stage];
  x.flows_left = stage.flow_count;
  if (x.flows_left == 0) {
    stage_done(tr);
    return;
  }
  flows_.start_batch(now_, stage.batch, tr);
  schedule_flow_check();
}

// A stage's flows are done: the next stage starts after its latency, or the ops end.
void SimRun::stage_done(int tr) {
  Transfer& x = transfers_[tr];
  if (x.stage + 1 < x.stages->stages.size()) {
    ++x.stage;
    push(now_ + x.stages->stages[x.stage].latency_ns, EvType::kTransferGo, tr);
    return;
  }
  if (x.instance < 0) {
    complete(x.op);
    return;
  }
  for (OpId id : instances_[x.instance].arrived) complete(id);
}

void SimRun::schedule_flow_check() {
  ++flow_gen_;
  const TimeNs next = flows_.next_completion_ns();
  if (next >= 0) push(std::max(next, now_), EvType::kFlowCheck, flow_gen_);
}

void SimRun::on_flow_check(std::int64_t gen) {
  if (gen != flow_gen_) return;  // rates changed since this was scheduled
  advance_flows();
  schedule_flow_check();
}

void SimRun::advance_flows() {
  // stage_done only queues events, so the flow network's list stays valid while it is read.
  // Runs of one transfer's flows: the count reaches 0 on a run's last flow, where the per-flow
  // countdown did.
  for (const engine::FlowNetwork::TagCount& run : flows_.advance_counts(now_)) {
    Transfer& x = transfers_[run.tag];
    x.flows_left -= run.count;
    if (x.flows_left == 0) stage_done(static_cast<int>(run.tag));
  }
}

void SimRun::complete(OpId id) {
  const Op& op = program_.ops[id];
  timings_[id].end_ns = now_;
  if (timings_[id].start_ns < 0) timings_[id].start_ns = now_;
  done_[id] = 1;
  ++done_count_;
  if (op.kind == OpKind::kFree) backpressure_.on_complete(op);
  if (op.kind == OpKind::kCollective) set_holder(id, op.gpu, 0, 0);
  if (op.kind == OpKind::kCopy && op.copy_kind != core::CopyKind::kD2D && op.fixed_ns < 0)
    set_copy_traffic(op, 0);
  if (op.stream >= 0 && streams_[op.stream].running == id) {
    streams_[op.stream].running = core::kNoOp;
    push(now_, EvType::kStreamCheck, op.stream);
  }
  host_waiters_.drain(id, [this](int t) { push(now_, EvType::kThreadStep, t); });
  stream_waiters_.drain(id, [this](int s) { push(now_, EvType::kStreamCheck, s); });
}

// [SECTION] Event loop ---------------------------------------------------------------------------

std::string SimRun::describe_stuck() const {
  for (std::size_t t = 0; t < threads_.size(); ++t) {
    const ThreadState& th = threads_[t];
    if (th.pos < th.ops.size()) {
      const Op& op = program_.ops[th.ops[th.pos]];
      return "thread '" + program_.threads[t].name + "' stuck before op " + std::to_string(op.id) +
             " '" + program_.name_of(op) + "'";
    }
  }
  for (std::size_t s = 0; s < streams_.size(); ++s) {
    if (!streams_[s].queue.empty()) {
      const Op& op = program_.ops[streams_[s].queue.front()];
      return "stream " + std::to_string(s) + " stuck at op " + std::to_string(op.id) + " '" +
             program_.name_of(op) + "'";
    }
  }
  return "collective waiting for members";
}

// A wake-up is acted on only in a state that can move on: idle or blocked on a host wait, or
// waiting for the GIL or a core that has just been handed over.
bool SimRun::wants_step(int t) const {
  const ThreadState& th = threads_[t];
  switch (th.phase) {
    case ThreadPhase::kIdle:
    case ThreadPhase::kBlocked:
      return true;
    case ThreadPhase::kWaitGil:
      return th.holds_gil;
    case ThreadPhase::kWaitCore:
      return th.holds_core;
    default:
      return false;
  }
}

void SimRun::prepare_ops() {
  // The per-op state, filled in chunks of kPrepareChunk ops with the count published after each
  // (docs/limits.md, "Progress": "preparing the simulation"). For millions of ops these are
  // hundreds of MB whose pages are faulted in as they are first written: seconds on GPT-3 with
  // every rank, one assign() with no count before. The values are those of one assign().
  constexpr std::size_t kPrepareChunk = std::size_t{1} << 16;
  const std::size_t n = program_.ops.size();
  core::ProgressCount count(ctl_.progress, "preparing the simulation", static_cast<std::int64_t>(n),
                            "ops", 1);
  timings_.clear();
  done_.clear();
  earliest_.clear();
  timings_.reserve(n);
  done_.reserve(n);
  earliest_.reserve(n);
  host_waiters_.reset(0);
  stream_waiters_.reset(0);
  threads_.resize(program_.threads.size());
  for (const core::ThreadDesc& td : program_.threads) {
    threads_[td.id].process = td.process;
    threads_[td.id].node = program_.processes[td.process].node;
  }
  for (std::size_t at = 0; at < n; at += kPrepareChunk) {
    const std::size_t k = std::min(kPrepareChunk, n - at);
    timings_.insert(timings_.end(), k, core::OpTiming{});
    done_.insert(done_.end(), k, 0);
    earliest_.insert(earliest_.end(), k, 0);
    host_waiters_.extend(k);
    stream_waiters_.extend(k);
    for (std::size_t i = at; i < at + k; ++i) {
      const Op& op = program_.ops[i];
      threads_[op.thread].ops.push_back(op.id);
    }
    count.add(static_cast<std::int64_t>(k));
  }
  count.finish();
}

core::ExecutionResult SimRun::run() {
  const std::size_t n = program_.ops.size();
  prepare_ops();
  streams_.resize(program_.streams.size());
  gil_.assign(program_.processes.size(), FifoResource(1));
  cores_.assign(static_cast<std::size_t>(scenario_.cluster.nodes),
                FifoResource(std::max(1, scenario_.host.cpu_cores)));
  if (program_.symmetry.enabled()) {
    // Rank symmetry: a node's cores are shared with the processes of its mirrored GPUs, which do
    // not run here; the simulated ones get their share, cores x simulated / active GPUs of the node
    // (docs/cost-model.md, "Rank symmetry").
    std::vector<int> active(static_cast<std::size_t>(scenario_.cluster.nodes), 0),
        simulated(active);
    for (int g : program_.active_gpus) {
      ++active[g / scenario_.cluster.gpus_per_node];
      if (program_.symmetry.weight_of_gpu[g] > 0) ++simulated[g / scenario_.cluster.gpus_per_node];
    }
    for (std::size_t nd = 0; nd < active.size(); ++nd) {
      if (active[nd] == 0 || simulated[nd] == 0) continue;
      const int share = static_cast<int>(static_cast<std::int64_t>(scenario_.host.cpu_cores) *
                                         simulated[nd] / active[nd]);
      cores_[nd] = FifoResource(std::max(1, share));
    }
  }
  {
    // docs/cost-model.md, "Resource sharing": each GPU's SMs, achieved HBM bandwidth, straggler
    // factor.
    const core::GpuSpec& g = scenario_.cluster.gpu;
    std::vector<GpuCapacity> caps(static_cast<std::size_t>(program_.world_gpus));
    for (int i = 0; i < program_.world_gpus; ++i)
      caps[static_cast<std::size_t>(i)] = GpuCapacity{
          g.sm_count, g.hbm_sharing ? g.mem_bw_bytes_per_s * g.mem_bw_efficiency * 1e-9 : 0.0,
          scenario_.cluster.slowdown_of(i)};
    shares_.reset(std::move(caps), n);
  }
  backpressure_.reset(program_, usable_memory_by_gpu(program_, scenario_.cluster));
  group_mirrors_.assign(program_.groups.size(), {});
  group_mirrors_known_.assign(program_.groups.size(), 0);
  instances_.resize(static_cast<std::size_t>(program_.collective_instances));
  // An instance starts when all its ops arrived: one per group member, or per representative
  // member under rank symmetry (validate_program checks the count).
  for (const Op& op : program_.ops) {
    if (op.kind == OpKind::kCollective && op.instance >= 0) ++instances_[op.instance].expected;
  }
  for (std::size_t t = 0; t < threads_.size(); ++t)
    push(0, EvType::kThreadStep, static_cast<std::int64_t>(t));

  core::ExecutionResult res;
  res.backend = "sim";
  // "simulating" counts two units per op, its issue by its host thread and its end (docs/limits.md,
  // "Progress"): the host threads run ahead of the GPUs, so on GPT-3 with every rank the first
  // half of the events issue every op before the first few thousand ops end.
  if (ctl_.progress)
    ctl_.progress->begin("simulating", 2 * static_cast<std::int64_t>(n), "op issues and ends");
  while (!queue_.empty()) {
    const Event ev = queue_.pop(&now_);
    ++events_;
    if ((events_ & 0xFFF) == 0) {
      if (ctl_.progress) ctl_.progress->set_done(issued_ + done_count_);
      if (ctl_.cancel && ctl_.cancel->load()) {
        res.complete = false;
        break;
      }
    }
    switch (ev.type) {
      case EvType::kThreadStep:
        if (wants_step(static_cast<int>(ev.subject))) step_thread(static_cast<int>(ev.subject));
        break;
      case EvType::kPythonDone:
      case EvType::kDispatchDone:
        step_thread(static_cast<int>(ev.subject));
        break;
      case EvType::kStreamCheck:
        check_stream(static_cast<int>(ev.subject));
        break;
      case EvType::kComputeDone: {
        // subject: op | generation << 32; an older generation's end was moved by a re-rating.
        const auto id = static_cast<OpId>(ev.subject & 0xFFFFFFFF);
        const auto gen = static_cast<std::uint32_t>(ev.subject >> 32);
        if (done_[id] || gen != shares_.generation(id)) break;
        if (program_.ops[id].kind != OpKind::kCollective && program_.ops[id].fixed_ns < 0) {
          shares_.finish_kernel(id, program_.ops[id].gpu, now_);
          push_moved();
        }
        complete(id);
        break;
      }
      case EvType::kTransferGo:
        transfer_go(static_cast<int>(ev.subject));
        break;
      case EvType::kFlowCheck:
        on_flow_check(ev.subject);
        break;
    }
  }
  if (ctl_.progress) ctl_.progress->set_done(issued_ + done_count_);
  if (res.complete && done_count_ != static_cast<std::int64_t>(n)) {
    const std::string why = "simulation deadlock: " + describe_stuck();
    CSIM_ASSERT_MSG(false, why.c_str());
  }
  res.timings = std::move(timings_);
  res.events_processed = events_;
  backpressure_notes(backpressure_, &res.notes);
  return res;
}

}  // namespace

SimExecutor::SimExecutor(const core::Scenario& scenario)
    : scenario_(scenario), comm_(core::comm_params_for(scenario)) {}

core::ExecutionResult SimExecutor::run(const core::Program& program,
                                       const core::RunControl& control) {
  SimRun e(scenario_, comm_, program, control);
  return e.run();
}

}  // namespace csim::sim
