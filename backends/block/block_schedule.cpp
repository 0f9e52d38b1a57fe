// docs/block-eval.md, "Schedule".
//
// [SECTION] index
//   Units        one pass over the ops: per stream its slots (prefix sums of the ops' durations)
//                cut into chains and single comm/copy ops; per thread its host segments
//   Transfers    each distinct transfer timed once, alone, on the flow network (mirrors included)
//   Host         a thread's segment (ops between host waits) released when its waits are met
//   Streams      FIFO of units; a chain's kernels re-rated when NCCL kernels start or end
//   Figures      step time, memory peaks, exposed communication
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "backends/block/block_eval.hpp"
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

// An allocation or free as the figures need it, copied from its op while the ops are read in
// order (the figures then never go back to the ops).
struct MemInfo {
  Bytes delta = 0;  // + allocated, - freed
  int gpu = 0;
  std::uint8_t category = 0;
  bool early = true;  // step <= 1
};

// One stream's ops in issue order ("slots") with prefix sums of their base durations: kernels
// (before the rate factor) and in-line collectives apart, so that any run of a chain costs O(1).
struct StreamSlots {
  int thread = -1, gpu = 0;
  std::vector<OpId> op;
  std::vector<TimeNs> pc{0}, pm{0};  // prefix sums, size slots + 1
  std::vector<TimeNs> er;            // earliest start after the segment's ready time
  std::vector<int> mem;              // slots of allocations and frees
  std::vector<MemInfo> mem_info;     // by position in `mem`
  std::vector<int> units;            // in order
  std::size_t next = 0;              // run state: the next unit to start
  bool busy = false;
};

struct Unit {
  UnitKind kind = UnitKind::kChain;
  int stream = 0, gpu = 0, step = 0, seg = 0;  // seg: the issuing thread's host segment
  int first = 0, end = 0;                      // slots
  TimeNs transfer_ns = 0;                      // kComm / kCopy: the transfer alone
  TimeNs host_slack = 0;  // max over slots of (er - base offset in the chain): docs "Host"
  // Run state.
  TimeNs start_ns = -1, t0 = 0;
  int seg_pos = 0, mem_next = 0;
  double factor = 1;
  std::uint32_t gen = 0;
  bool stepwise = false;  // launches gate the chain: its op times were walked one by one
};

struct HostSeg {
  OpId head = core::kNoOp;
  TimeNs cum_end = 0;  // python + dispatch of the segment's ops
  TimeNs ready = -1;
};

struct HostOp {
  int seg;
  TimeNs cum_after;
  OpId op;
};

struct ThreadState {
  int gpu = 0;
  std::vector<HostSeg> segs;
  std::vector<HostOp> host_ops;
  std::size_t host_next = 0;
  int released = -1;
  int first_step_seg = -1;
  TimeNs first_step_cum = 0, cum = 0;
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
  const MemInfo* info;
};

using PlanKey = std::tuple<int, int, int, int, int, Bytes>;

// Direct-mapped memo of compute_duration_ns: a layer's kernel recurs every micro-batch.
struct ComputeMemo {
  struct Entry {
    double flops = -1;
    Bytes bytes = -1;
    int kind = -1;
    TimeNs d = 0;
  };
  std::array<Entry, 4096> e{};
  TimeNs get(const core::GpuSpec& g, const Op& op) {
    std::uint64_t fb = 0;
    std::memcpy(&fb, &op.flops, sizeof fb);
    const int kind = static_cast<int>(op.compute_kind) * 16 + static_cast<int>(op.dtype);
    std::uint64_t h = fb * 0x9E3779B97F4A7C15ull ^
                      static_cast<std::uint64_t>(op.bytes) * 0xC2B2AE3D27D4EB4Full ^
                      static_cast<std::uint64_t>(kind);
    Entry& x = e[(h ^ (h >> 29)) & (e.size() - 1)];
    if (x.flops != op.flops || x.bytes != op.bytes || x.kind != kind) {
      x = {op.flops, op.bytes, kind,
           core::compute_duration_ns(g, op.compute_kind, op.dtype, op.flops, op.bytes)};
    }
    return x.d;
  }
};

class Schedule {
 public:
  Schedule(const core::Scenario& s, const core::Program& p)
      : s_(s), p_(p), comm_(core::comm_params_for(s)), topo_(s.cluster) {}
  std::string build();  // empty when the block path applies, else why not
  EvalResult run();

 private:
  const core::Scenario& s_;
  const core::Program& p_;
  core::CommParams comm_;
  core::Topology topo_;
  std::vector<int> local_link_;  // time_plan's scratch: topology link -> compact index, -1
  std::vector<int> stamp_;       // images_disjoint's scratch: GPU -> image, -1
  std::map<PlanKey, TimeNs> transfer_ns_;
  std::array<std::pair<PlanKey, TimeNs>, 1024> transfer_memo_{};
  std::map<std::vector<int>, std::vector<int>> mirrors_;
  ComputeMemo compute_;
  engine::EventQueue<Event> q_;
  TimeNs now_ = 0;

  std::vector<Unit> units_;
  std::vector<StreamSlots> streams_;
  std::vector<ThreadState> threads_;
  std::vector<std::vector<int>> streams_of_gpu_;
  std::vector<int> compute_stream_of_gpu_;
  std::vector<int> group_members_;  // ops per instance of the group's collectives
  std::vector<int> target_of_op_;   // dense index of the ops others wait for, else -1
  std::vector<TimeNs> target_end_;  // by target: end, -1 until known
  std::vector<std::vector<int>> target_streams_, target_threads_;
  std::vector<int> running_chain_;  // per GPU: its running chain with kernels, -1
  std::vector<int> comm_sms_;
  std::vector<int> inst_arrived_;
  std::vector<std::vector<int>> inst_units_;
  // Figures.
  std::vector<MemEvent> mem_;
  std::vector<TimeNs> step_begin_, step_end_;  // per GPU, step >= 1
  std::vector<TimeNs> inline_comm_;            // per GPU: the chains' in-line collectives
  std::vector<std::vector<std::pair<TimeNs, TimeNs>>> busy_, comm_iv_;  // per GPU
  std::int64_t chained_ops_ = 0, chains_ = 0;

  int target(OpId op);
  void end_unit_at(OpId op, std::vector<int>& open);
  TimeNs transfer_of(const Op& op);
  TimeNs time_plan(core::TransferPlan plan, const std::vector<int>& mirror_gpus);
  bool images_disjoint(const core::TransferPlan& plan, const std::vector<int>& gpus);
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
  TimeNs time_of(const Unit& u, int j) const {
    const StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
    const TimeNs c =
        st.pc[static_cast<std::size_t>(j)] - st.pc[static_cast<std::size_t>(u.seg_pos)];
    const TimeNs m =
        st.pm[static_cast<std::size_t>(j)] - st.pm[static_cast<std::size_t>(u.seg_pos)];
    return u.t0 +
           (u.factor == 1.0
                ? c
                : static_cast<TimeNs>(std::llround(static_cast<double>(c) * u.factor))) +
           m;
  }
  void emit_mem(Unit& u, int upto);
  void release_segments(int t);
  void check_stream(int s);
  void start_unit(int u);
  TimeNs walk_stepwise(Unit& u);
  void rerate(int gpu);
  void sms_change(int gpu, int delta);
  void finish_unit(int u, TimeNs end);
  void target_done(OpId op, TimeNs t);
  EvalResult figures() const;
};

// [SECTION] Units --------------------------------------------------------------------------------

int Schedule::target(OpId op) {
  int& k = target_of_op_[static_cast<std::size_t>(op)];
  if (k < 0) {
    k = static_cast<int>(target_end_.size());
    target_end_.push_back(-1);
    target_streams_.emplace_back();
    target_threads_.emplace_back();
  }
  return k;
}

// Others wait for `op`: it must end its unit, so that its end is an event. Splits the chain that
// holds it when it is not the chain's last op (docs/block-eval.md, "Chains").
void Schedule::end_unit_at(OpId op, std::vector<int>& open) {
  const Op& o = p_.ops[static_cast<std::size_t>(op)];
  if (o.stream < 0) return;
  StreamSlots& st = streams_[static_cast<std::size_t>(o.stream)];
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
  if (s_.training.steps != 1) return "more than one training step";
  if (p_.threads.empty()) return "no host threads";
  const std::size_t gpus = static_cast<std::size_t>(p_.world_gpus);
  // One thread per process (no GIL waits) and per GPU.
  std::vector<int> per_process(p_.processes.size(), 0), per_gpu(gpus, 0);
  std::vector<int> per_node(static_cast<std::size_t>(s_.cluster.nodes), 0);
  threads_.resize(p_.threads.size());
  for (const core::ThreadDesc& t : p_.threads) {
    if (t.gpu < 0 || t.gpu >= p_.world_gpus) return "a host thread without a GPU";
    if (++per_process[static_cast<std::size_t>(t.process)] > 1)
      return "a process with several threads (GIL, data-loader workers)";
    if (++per_gpu[static_cast<std::size_t>(t.gpu)] > 1) return "a GPU driven by several threads";
    ++per_node[static_cast<std::size_t>(p_.processes[static_cast<std::size_t>(t.process)].node)];
    threads_[static_cast<std::size_t>(t.id)].gpu = t.gpu;
  }
  // Enough CPU cores that no thread waits for one (the op-level share under rank symmetry:
  // cores x simulated / active GPUs of the node, backends/sim/sim_executor.cpp).
  std::vector<int> active(per_node.size(), 0), simulated(per_node.size(), 0);
  for (int g : p_.active_gpus) {
    ++active[static_cast<std::size_t>(g / s_.cluster.gpus_per_node)];
    if (!p_.symmetry.enabled() || p_.symmetry.weight_of_gpu[static_cast<std::size_t>(g)] > 0)
      ++simulated[static_cast<std::size_t>(g / s_.cluster.gpus_per_node)];
  }
  for (std::size_t nd = 0; nd < per_node.size(); ++nd) {
    int cores = std::max(1, s_.host.cpu_cores);
    if (p_.symmetry.enabled() && active[nd] > 0 && simulated[nd] > 0)
      cores = std::max(1, static_cast<int>(static_cast<std::int64_t>(s_.host.cpu_cores) *
                                           simulated[nd] / active[nd]));
    if (per_node[nd] > cores) return "more threads than CPU cores on a node";
  }
  streams_.resize(p_.streams.size());
  streams_of_gpu_.assign(gpus, {});
  compute_stream_of_gpu_.assign(gpus, -1);
  for (const core::StreamDesc& sd : p_.streams) {
    streams_[static_cast<std::size_t>(sd.id)].gpu = sd.gpu;
    streams_of_gpu_[static_cast<std::size_t>(sd.gpu)].push_back(sd.id);
    if (sd.role != core::StreamRole::kCompute) continue;
    if (compute_stream_of_gpu_[static_cast<std::size_t>(sd.gpu)] >= 0)
      return "several compute streams on a GPU";
    compute_stream_of_gpu_[static_cast<std::size_t>(sd.gpu)] = sd.id;
  }
  // A collective instance holds one op per member that issues ops (docs/program.md, "Rank
  // symmetry": the representatives).
  group_members_.assign(p_.groups.size(), 0);
  for (const core::CommGroup& g : p_.groups)
    for (int gpu : g.gpus)
      group_members_[static_cast<std::size_t>(g.id)] +=
          !p_.symmetry.enabled() || p_.symmetry.weight_of_gpu[static_cast<std::size_t>(gpu)] > 0;
  target_of_op_.assign(p_.ops.size(), -1);
  const core::GpuSpec& gpu = s_.cluster.gpu;
  const TimeNs latency = us_to_ns(s_.host.launch_latency_us);
  std::vector<int> open(p_.streams.size(), -1);  // open chain per stream
  bool any_compute = false;
  for (const Op& op : p_.ops) {
    ThreadState& th = threads_[static_cast<std::size_t>(op.thread)];
    if (op.gpu != th.gpu) return "a thread issuing for another GPU";
    bool host_wait = th.segs.empty();
    for (const core::Dep& d : op.deps) host_wait = host_wait || d.kind == core::DepKind::kHostWaits;
    if (host_wait) {  // a new host segment; no chain crosses it (docs/block-eval.md, "Host")
      th.segs.push_back({op.id, 0, -1});
      th.cum = 0;
      for (int s : streams_of_gpu_[static_cast<std::size_t>(th.gpu)])
        open[static_cast<std::size_t>(s)] = -1;
    }
    for (const core::Dep& d : op.deps) {
      const int k = target(d.op);
      if (d.kind == core::DepKind::kHostWaits) {
        target_threads_[static_cast<std::size_t>(k)].push_back(op.thread);
      } else if (op.stream >= 0) {
        target_streams_[static_cast<std::size_t>(k)].push_back(op.stream);
      }
      end_unit_at(d.op, open);
    }
    const int seg = static_cast<int>(th.segs.size()) - 1;
    if (op.step >= 1 && th.first_step_seg < 0) {
      th.first_step_seg = seg;
      th.first_step_cum = th.cum;
    }
    th.cum += op.python_ns + op.dispatch_ns;
    th.segs.back().cum_end = th.cum;
    if (op.stream < 0) {
      th.host_ops.push_back({seg, th.cum, op.id});
      continue;
    }
    StreamSlots& st = streams_[static_cast<std::size_t>(op.stream)];
    if (st.gpu != op.gpu) return "an op on another GPU's stream";
    const bool compute_stream =
        op.stream == compute_stream_of_gpu_[static_cast<std::size_t>(op.gpu)];
    if (st.thread < 0) {
      st.thread = op.thread;
      if (compute_stream) {  // most of a thread's ops: reserve once rather than grow
        const std::size_t guess = p_.ops.size() / p_.threads.size() + 16;
        st.op.reserve(guess);
        st.er.reserve(guess);
        st.pc.reserve(guess + 1);
        st.pm.reserve(guess + 1);
      }
    }
    if (st.thread != op.thread) return "a stream fed by several threads";
    TimeNs dc = 0, dm = 0;
    UnitKind kind = UnitKind::kChain;
    bool mem = false;
    switch (op.kind) {
      case OpKind::kCompute:
        if (!compute_stream) return "kernels on a stream other than the GPU's compute stream";
        any_compute = true;
        dc = compute_.get(gpu, op);
        break;
      case OpKind::kCollective: {
        const bool alone =
            op.fixed_ns >= 0 || group_members_[static_cast<std::size_t>(op.group)] == 1;
        dm = op.fixed_ns >= 0 ? op.fixed_ns : transfer_of(op);
        if (!(compute_stream && alone)) kind = UnitKind::kComm;
        break;
      }
      case OpKind::kCopy:
        if (op.copy_kind == core::CopyKind::kD2D) return "on-device copies";
        dm = op.fixed_ns >= 0 ? op.fixed_ns : transfer_of(op);
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
                             static_cast<std::uint8_t>(op.mem_category), op.step <= 1});
    }
    const std::size_t f = static_cast<std::size_t>(u.first), k = static_cast<std::size_t>(slot);
    u.host_slack = std::max(u.host_slack, er - (st.pc[k] + st.pm[k] - st.pc[f] - st.pm[f]));
    st.pc.push_back(st.pc.back() + dc);
    st.pm.push_back(st.pm.back() + dm);
    ++u.end;
    if (kind == UnitKind::kChain) {
      ++chained_ops_;
    } else {
      u.transfer_ns = dm;
      cur = -1;
    }
  }
  if (!any_compute) return "no kernels";
  inst_arrived_.assign(static_cast<std::size_t>(p_.collective_instances), 0);
  inst_units_.assign(static_cast<std::size_t>(p_.collective_instances), {});
  return {};
}

// [SECTION] Transfers ----------------------------------------------------------------------------

// docs/block-eval.md, "Transfers": a transfer alone on the topology, its mirror images included
// (the op-level simulator's plan, backends/sim/sim_executor.cpp), timed once per plan key.
TimeNs Schedule::transfer_of(const Op& op) {
  PlanKey key;
  if (op.kind == OpKind::kCopy) {
    key = {0, static_cast<int>(op.copy_kind), op.gpu, op.peer_gpu, 0, op.bytes};
  } else {
    key = {1,       static_cast<int>(op.collective), static_cast<int>(op.algo), op.group, op.root,
           op.bytes};
  }
  // A memo in front of the map: the same few transfers recur every layer and micro-batch.
  const std::size_t h = (static_cast<std::size_t>(std::get<1>(key)) * 31u +
                         static_cast<std::size_t>(std::get<3>(key)) * 131u +
                         static_cast<std::size_t>(std::get<2>(key)) * 7u +
                         static_cast<std::size_t>(std::get<5>(key)) * 2654435761u +
                         static_cast<std::size_t>(std::get<0>(key))) &
                        (transfer_memo_.size() - 1);
  if (std::get<5>(transfer_memo_[h].first) == op.bytes && transfer_memo_[h].first == key)
    return transfer_memo_[h].second;
  const auto it = transfer_ns_.find(key);
  if (it != transfer_ns_.end()) {
    transfer_memo_[h] = {key, it->second};
    return it->second;
  }
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
  transfer_memo_[h] = {key, d};
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

// docs/block-eval.md, "Transfers": the mirror images of a transfer cross links of their own when
// every link belongs to one GPU (NVSwitch ports, PCIe, a NIC per GPU, one non-blocking switch
// between nodes), the plan moves data between GPUs only, and the images' GPU sets are pairwise
// equal or disjoint; then the transfer alone takes as long as with its images.
bool Schedule::images_disjoint(const core::TransferPlan& plan, const std::vector<int>& gpus) {
  const core::ClusterSpec& c = s_.cluster;
  const bool per_gpu_links =
      (c.gpus_per_node == 1 || c.intra.kind == core::IntraNodeKind::kNvswitch) &&
      (c.nodes == 1 || (c.nics_per_node >= c.gpus_per_node && c.fabric.nodes_per_leaf <= 0));
  if (!per_gpu_links) return false;
  std::vector<const core::TransferPlan*> stages{&plan};
  for (const core::TransferPlan& st : plan.then) stages.push_back(&st);
  for (const core::TransferPlan* st : stages)
    for (const core::FlowSpec& f : st->flows)
      if (f.src.kind != core::Endpoint::Kind::kGpu || f.dst.kind != core::Endpoint::Kind::kGpu)
        return false;
  if (stamp_.empty()) stamp_.assign(static_cast<std::size_t>(p_.world_gpus), -1);
  bool ok = true;
  for (std::size_t m = 0; m < p_.symmetry.images.size() && ok; ++m) {
    const std::vector<int>& img = p_.symmetry.images[m];
    const int first = stamp_[static_cast<std::size_t>(img[static_cast<std::size_t>(gpus[0])])];
    if (first >= 0) {  // the same set as an earlier image's, or overlapping it
      for (int g : gpus)
        ok = ok && stamp_[static_cast<std::size_t>(img[static_cast<std::size_t>(g)])] == first;
      continue;
    }
    for (int g : gpus) {
      int& st = stamp_[static_cast<std::size_t>(img[static_cast<std::size_t>(g)])];
      ok = ok && st < 0;
      st = static_cast<int>(m);
    }
  }
  for (const std::vector<int>& img : p_.symmetry.images)
    for (int g : gpus) stamp_[static_cast<std::size_t>(img[static_cast<std::size_t>(g)])] = -1;
  return ok;
}

// Each stage after its latency: its flows (mirror images included) alone on a flow network of
// just the links they cross, so that the cost grows with the transfer, not with the cluster.
TimeNs Schedule::time_plan(core::TransferPlan plan, const std::vector<int>& mirror_gpus) {
  if (p_.symmetry.enabled() && !images_disjoint(plan, mirror_gpus))
    add_mirror_flows(plan, mirrors_of(mirror_gpus));
  std::vector<core::TransferPlan> stages{plan};
  for (core::TransferPlan& st : plan.then) stages.push_back(st);
  const std::vector<core::Link>& all = topo_.links();
  if (local_link_.empty()) local_link_.assign(all.size(), -1);
  TimeNs total = 0;
  std::vector<engine::FlowStart> batch;
  std::vector<core::Link> links;
  std::vector<core::LinkId> used;
  for (const core::TransferPlan& st : stages) {
    total += st.latency_ns;
    batch.clear();
    links.clear();
    for (const core::FlowSpec& f : st.flows) {
      if (f.bytes <= 0) continue;
      engine::FlowStart fs;
      for (const core::LinkId l : topo_.route(f.src, f.dst)) {
        int& k = local_link_[static_cast<std::size_t>(l)];
        if (k < 0) {
          k = static_cast<int>(links.size());
          core::Link c;
          c.id = k;
          c.capacity_bytes_per_s = all[static_cast<std::size_t>(l)].capacity_bytes_per_s;
          links.push_back(c);
          used.push_back(l);
        }
        fs.route.push_back(k);
      }
      fs.bytes = f.bytes;
      fs.rate_cap = f.rate_cap_bytes_per_s;
      batch.push_back(std::move(fs));
    }
    for (const core::LinkId l : used) local_link_[static_cast<std::size_t>(l)] = -1;
    used.clear();
    if (batch.empty()) continue;
    engine::FlowNetwork net(links);
    net.start_batch(0, batch);
    TimeNs t = 0;
    while (net.active() > 0) {
      t = std::max(t, net.next_completion_ns());
      net.advance(t);
    }
    total += t;
  }
  return total;
}

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
    for (const core::Dep& d : p_.ops[static_cast<std::size_t>(sg.head)].deps) {
      if (d.kind != core::DepKind::kHostWaits) continue;
      const TimeNs e =
          target_end_[static_cast<std::size_t>(target_of_op_[static_cast<std::size_t>(d.op)])];
      if (e < 0 || e > now_) return;  // kThreadResume when it ends
      ready = std::max(ready, e);
    }
    ready = std::max(ready, now_);
    sg.ready = ready;
    th.released = k;
    if (th.first_step_seg == k)
      step_begin_[static_cast<std::size_t>(th.gpu)] = ready + th.first_step_cum;
    // Host work and markers end when issued.
    for (; th.host_next < th.host_ops.size() && th.host_ops[th.host_next].seg == k;
         ++th.host_next) {
      const HostOp& h = th.host_ops[th.host_next];
      const TimeNs end = ready + h.cum_after;
      if (p_.ops[static_cast<std::size_t>(h.op)].step >= 1)
        step_end_[static_cast<std::size_t>(th.gpu)] =
            std::max(step_end_[static_cast<std::size_t>(th.gpu)], end);
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
  for (const core::Dep& d :
       p_.ops[static_cast<std::size_t>(st.op[static_cast<std::size_t>(un.first)])].deps) {
    if (d.kind != core::DepKind::kStreamWaits) continue;
    const TimeNs e =
        target_end_[static_cast<std::size_t>(target_of_op_[static_cast<std::size_t>(d.op)])];
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
  const Op& op = p_.ops[static_cast<std::size_t>(st.op[static_cast<std::size_t>(u.first)])];
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
  if (++inst_arrived_[in] == group_members_[static_cast<std::size_t>(op.group)])
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
  for (int s : target_streams_[static_cast<std::size_t>(k)]) push(t, Ev::kStreamCheck, s);
  for (int th : target_threads_[static_cast<std::size_t>(k)]) push(t, Ev::kThreadResume, th);
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
    sms_change(u.gpu,
               -sms_of(p_.ops[static_cast<std::size_t>(st.op[static_cast<std::size_t>(u.first)])]));
  }
  if (u.step >= 1) {
    step_end_[g] = std::max(step_end_[g], end);
    if (with_kernels) {
      inline_comm_[g] +=
          st.pm[static_cast<std::size_t>(u.end)] - st.pm[static_cast<std::size_t>(u.first)];
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
  step_begin_.assign(gpus, -1);
  step_end_.assign(gpus, -1);
  inline_comm_.assign(gpus, 0);
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

// [SECTION] Figures ------------------------------------------------------------------------------

// |a \ b| for interval lists (docs/block-eval.md, "Exposed communication"), within [lo, hi].
TimeNs minus_measure(std::vector<std::pair<TimeNs, TimeNs>> a,
                     std::vector<std::pair<TimeNs, TimeNs>> b, TimeNs lo, TimeNs hi) {
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
    if (p_.symmetry.enabled() && p_.symmetry.weight_of_gpu[static_cast<std::size_t>(g)] == 0)
      continue;
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
      const MemInfo& mi = *e.info;
      const int k = index[static_cast<std::size_t>(mi.gpu)];
      if (k < 0) continue;
      const std::size_t kk = static_cast<std::size_t>(k);
      cur[kk][mi.category] += mi.delta;
      total[kk] += mi.delta;
      if (pass == 0) {
        r.peaks[kk].peak_bytes = std::max(r.peaks[kk].peak_bytes, total[kk]);
        if (mi.early) resident[kk] = cur[kk];
      } else {
        Bytes lifted = total[kk];
        for (int c = 0; c < core::kNumMemCategories; ++c)
          lifted += std::max<Bytes>(
              0, resident[kk][static_cast<std::size_t>(c)] - cur[kk][static_cast<std::size_t>(c)]);
        steady[kk] = std::max(steady[kk], lifted);
      }
    }
  }
  for (std::size_t k = 0; k < n; ++k)
    r.peaks[k].peak_bytes = std::max(r.peaks[k].peak_bytes, steady[k]);
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

std::string block_path_unsupported(const core::Scenario& scenario, const core::Program& program) {
  Schedule s(scenario, program);
  return s.build();
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
