// The block path's schedule (docs/block-eval.md): the state shared by its parts. Private to
// backends/block: block_units.cpp (reading the ops into chains), block_transfers.cpp (timing each
// distinct transfer, the collectives' shared links), block_schedule.cpp (host segments, streams,
// the event loop) and block_figures.cpp (step time, peaks, exposed communication).
#pragma once

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backends/block/block_eval.hpp"
#include "core/cost/collective_cost.hpp"
#include "core/cost/compute_cost.hpp"
#include "core/engine/event_queue.hpp"
#include "core/engine/flow_network.hpp"
#include "core/hardware/topology.hpp"
#include "core/hardware/topology_cache.hpp"

namespace csim::block::detail {

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
  int stream = 0;     // its stream, and its position among that stream's allocations and frees
  int nth = 0;
};

// The OOM verdict with where its allocation stands in its stream: the nth of `of` allocations
// and frees (block_periodic.cpp matches the verdicts of two pipelines by it).
struct MemVerdict {
  Oom oom;
  int stream = 0, nth = 0, of = 0;
  TimeNs t = 0;  // the allocation's time
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
  // docs/block-eval.md, "Re-rating": each slot's kernel HBM bytes (0 for other ops), the largest
  // bytes per model ns of its kernels, and per (rate factor f, HBM level L) met while HBM binds the
  // prefix sums of max(f x d, M / L), built the first time a chain runs in that state.
  std::vector<double> hbm{};
  double max_demand = 0;
  struct Bound {
    double f = 1, level = 0;
    std::vector<double> prefix;
  };
  std::vector<Bound> bound{};
};

struct Unit {
  UnitKind kind = UnitKind::kChain;
  int stream = 0, gpu = 0, step = 0, seg = 0;  // seg: the issuing thread's host segment
  int first = 0, end = 0;                      // slots
  TimeNs transfer_ns = 0;                      // kComm / kCopy: the transfer alone
  TimeNs host_slack = 0;  // max over slots of (er - base offset in the chain): docs "Host"
  int wait_first = 0, wait_end = 0;  // its first op's stream waits: targets in Schedule::waits_
  int instance = -1, members = 0, sms = 0;  // kComm: the collective instance, its NCCL SMs
  bool fixed = false;                       // kComm: a stand-in of fixed duration
  double hbm_ask = 0;                       // kComm / kCopy: HBM bytes/ns while its data moves
  int peer_gpu = -1;                        // kCopy: a peer copy's source GPU
  // Run state.
  TimeNs start_ns = -1, t0 = 0;
  int seg_pos = 0, mem_next = 0;
  double factor = 1;
  int bound = -1;  // >= 0: HBM binds a kernel of the chain: StreamSlots::bound[bound] times it
  std::uint32_t gen = 0;
  bool stepwise = false;  // launches gate the chain: its op times were walked one by one
};

struct HostSeg {
  OpId head = core::kNoOp;
  int wait_first = 0, wait_end = 0;  // the head's host waits: targets in Schedule::waits_
  TimeNs cum_end = 0;                // python + dispatch of the segment's ops
  TimeNs ready = -1;
  int check = -1;  // the head is an allocation checked for backpressure: its BpCheck
};

// docs/block-eval.md, "Allocation backpressure" (block_backpressure.cpp).
struct BpFree {
  OpId op;  // a free on another stream than its allocation's, after record_stream
  Bytes bytes;
};
struct BpCheck {
  OpId alloc = core::kNoOp;
  int gpu = 0;
  Bytes base = 0, bytes = 0;  // issued allocations less issued frees before it; its own bytes
  int frees_before = 0;       // its GPU's cross-stream frees issued before it
  enum State : std::uint8_t { kUnchecked, kWaiting, kPassed } state = kUnchecked;
  std::vector<OpId> waits;  // kWaiting: the frees pending when it was checked
};
struct BpGpu {
  Bytes capacity = 0;  // usable memory (0: not checked)
  std::vector<BpFree> frees;
  std::size_t front = 0;    // frees before it have run
  bool checked = false;     // some allocation of the GPU is checked
  int waiting_thread = -1;  // the thread waiting for frees to run
};

struct HostOp {
  int seg;
  TimeNs cum_after;
  OpId op;
  int step;
};

// docs/summary.md, "Steps": a step's span on a GPU begins where its thread reaches the step's
// first op; the first op the trace draws (not an allocation, free or marker) tiles the steps.
struct StepMark {
  int step, seg;
  TimeNs cum;  // python + dispatch of the segment's ops before it
  bool drawn;
};

struct ThreadState {
  int gpu = 0;
  std::vector<HostSeg> segs;
  std::vector<HostOp> host_ops;
  std::size_t host_next = 0;
  int released = -1;
  std::vector<StepMark> marks;  // where each step's first op and first drawn op are issued
  std::size_t mark_next = 0;
  int last_step = 0;
  bool drawn = false;  // the current step's first drawn op was seen
  TimeNs cum = 0;
};

enum class Ev : std::uint8_t {
  kStreamCheck,
  kChainDone,
  kTransferDone,
  kThreadResume,
  kHostDone,
  kNetGo,     // a shared transfer's stage starts after its latency (subject: the transfer)
  kNetCheck,  // the shared flow network's next completion (gen: net_gen_ when scheduled)
};
struct Event {
  Ev type;
  std::uint32_t gen;
  std::int64_t subject;  // the stream, thread, op, unit or shared transfer it is about
};

struct MemEvent {
  TimeNs t;
  OpId op;
  const MemInfo* info;
};

using PlanKey = std::tuple<int, int, int, int, int, Bytes>;

// A transfer alone: its time, and the HBM bytes/ns it moves on each GPU taking part
// (docs/cost-model.md, "Resource sharing").
struct TransferTime {
  TimeNs ns = 0;
  double hbm_bytes_per_ns = 0;
};

// Transfers timed by one Schedule, handed to the next of the same configuration
// (docs/block-eval.md, "Periodic steady state": the two short pipelines move the same transfers).
// A transfer's time is a function of its plan key with the group's GPUs in place of the group's
// id (group ids are the lowering's order of first use), the topology and the rank symmetry's
// images (its mirrors); a Schedule takes the table only when the last two are the ones it was
// filled with.
struct TransferTable {
  // (copy 0 / collective 1, copy kind or collective, algorithm, root, bytes, GPUs: a copy's GPU
  // and peer, a collective's group)
  using Key = std::tuple<int, int, int, int, Bytes, std::vector<int>>;
  std::map<Key, TransferTime> times;
  const core::Topology* topology = nullptr;  // held alive by the Schedules' shared_ptr
  std::vector<std::vector<int>> images;      // core::RankSymmetry::images of the Programs
  bool filled = false;
};

// docs/block-eval.md, "Transfers": one stage of a collective's plan (mirror images included) on
// the schedule's shared flow network: its latency, then its flows as a registered batch.
struct NetStage {
  TimeNs latency_ns = 0;
  engine::FlowNetwork::BatchId batch = -1;
  int flows = 0;
};

// A collective instance moving its data on the shared flow network.
struct NetTransfer {
  int instance = -1;
  const std::vector<NetStage>* stages = nullptr;  // in Schedule::net_plans_ (nodes never move)
  std::size_t stage = 0;
  int flows_left = 0;
};

class Schedule {
 public:
  // `shared`, when given, is consulted and filled in transfer_of (TransferTable).
  Schedule(const core::Scenario& s, const core::Program& p, TransferTable* shared = nullptr)
      : scenario_(s),
        program_(p),
        comm_(core::comm_params_for(s)),
        topology_(core::shared_topology(s.cluster)),
        topo_(*topology_),
        shared_(shared),
        shared_links_(shares_links(s, p)) {}
  std::string build();  // empty when the block path applies, else why not
  EvalResult run();
  // After run(): the OOM verdict of the figures, and the verdict each GPU would get with its
  // capacity lowered by lower[k] (k: the GPU's index in the figures' peaks).
  const std::optional<MemVerdict>& verdict() const { return verdict_; }
  std::optional<MemVerdict> verdict_with_less(const std::vector<Bytes>& lower) const;
  // After run(): the earliest start, over the GPUs, of the unit that holds the GPU's last
  // forward op of the first step (block_oom_prefix.cpp; docs/block-eval.md, "Out of memory before
  // the last forward"); -1 when no chain holds a forward op.
  TimeNs last_forward_start() const;

 private:
  const core::Scenario& scenario_;
  const core::Program& program_;
  core::CommParams comm_;
  // Shared with every evaluation of the same cluster (core/hardware/topology_cache.hpp).
  std::shared_ptr<const core::Topology> topology_;
  const core::Topology& topo_;
  std::vector<int> local_link_;  // time_plan's scratch: topology link -> compact index, -1
  std::vector<int> stamp_;       // images_disjoint's scratch: GPU -> image, -1
  std::map<PlanKey, TransferTime> transfer_ns_;
  TransferTable* shared_ = nullptr;  // null, or checked against this Program in build()
  std::array<std::pair<PlanKey, TransferTime>, 1024> transfer_memo_{};
  std::map<std::vector<int>, std::vector<int>> mirrors_;
  core::OpComputeMemo compute_;
  engine::EventQueue<Event> events_;
  TimeNs now_ = 0;

  std::vector<Unit> units_;
  std::vector<StreamSlots> streams_;
  std::vector<ThreadState> threads_;
  std::vector<std::vector<int>> streams_of_gpu_;
  std::vector<int> compute_stream_of_gpu_;
  std::vector<int> group_members_;  // ops per instance of the group's collectives
  std::vector<int> waits_;          // targets waited for, by unit and host segment ranges
  std::vector<int> target_of_op_;   // dense index of the ops others wait for, else -1
  std::vector<TimeNs> target_end_;  // by target: end, -1 until known
  // Who waits for each target: (target, stream or -1 - thread) while reading the ops, then by
  // target (woken_first_[k] .. woken_first_[k + 1] in woken_).
  std::vector<std::pair<int, int>> waiters_;
  std::vector<int> woken_first_, woken_;
  std::vector<int> running_chain_;  // per GPU: its running chain with kernels, -1
  std::vector<int> comm_sms_;
  std::vector<std::vector<std::pair<int, double>>> hbm_holders_;  // per GPU: (unit, HBM ask)
  std::vector<double> asks_scratch_;
  double hbm_bytes_per_ns_ = 0;  // mem_bw x mem_bw_efficiency
  // docs/block-eval.md, "Transfers": the collectives' flows in flight share the topology's links.
  // Whether the collectives share the flow network at all: only where the Program has
  // all-to-alls (expert or context parallel), whose gap it closes; elsewhere the alone times
  // were within 0.12 % and the network costs 3-4x the evaluation (docs/block-eval.md).
  bool shared_links_ = false;
  std::unique_ptr<engine::FlowNetwork> net_;
  std::map<PlanKey, std::vector<NetStage>> net_plans_;
  std::vector<NetTransfer> net_transfers_;
  std::uint32_t net_gen_ = 0;
  std::vector<int> inst_arrived_;
  std::vector<std::vector<int>> inst_units_;
  // Figures.
  std::vector<MemEvent> mem_;  // by time, then op id, once run() has ended
  std::optional<MemVerdict> verdict_;
  std::vector<char> communicates_;  // per GPU: it runs a collective (its NCCL buffers count)
  // Per GPU and step (index gpu * (steps + 1) + step), step >= 1: the span's begin, its end, the
  // first drawn op's ready time; -1 while unknown.
  std::vector<TimeNs> step_begin_, step_end_, step_drawn_;
  int steps_ = 1;
  std::size_t at(int gpu, int step) const {
    return static_cast<std::size_t>(gpu) * static_cast<std::size_t>(steps_ + 1) +
           static_cast<std::size_t>(std::min(std::max(step, 0), steps_));
  }
  std::vector<std::vector<std::pair<TimeNs, TimeNs>>> inline_iv_;       // per GPU: chains' in-line
  std::vector<std::vector<TimeNs>> inline_ns_;                          // collectives, by chain
  std::vector<std::vector<std::pair<TimeNs, TimeNs>>> busy_, comm_iv_;  // per GPU
  std::int64_t chained_ops_ = 0, chains_ = 0;
  // Allocation backpressure (block_backpressure.cpp): empty vectors when no allocation is checked.
  std::vector<BpGpu> bp_gpus_;
  std::vector<BpCheck> bp_checks_;
  std::vector<int> bp_check_of_op_;  // by op: its check, -1
  std::vector<char> bp_free_;        // by op: a cross-stream free a check may wait for
  void plan_backpressure();
  bool bp_done(OpId free_op) const;
  bool bp_clear(int t, int c, TimeNs& ready);
  void bp_freed(OpId free_op, TimeNs t);

  int target(OpId op);
  void end_unit_at(OpId op, std::vector<int>& open);
  TransferTime transfer_of(const Op& op);
  TimeNs time_plan(core::TransferPlan plan, const std::vector<int>& mirror_gpus);
  bool images_disjoint(const core::TransferPlan& plan, const std::vector<int>& gpus);
  void add_mirror_flows(core::TransferPlan& plan, const std::vector<int>& mirrors) const;
  const std::vector<int>& mirrors_of(const std::vector<int>& gpus);
  static bool shares_links(const core::Scenario& s, const core::Program& p);
  const std::vector<NetStage>& net_plan(const Op& op);
  void net_start(int instance, const Op& op);
  void net_go(int tr);
  void net_stage_done(int tr);
  void net_advance();
  void net_schedule_check();
  double factor(int gpu) const;
  double hbm_level(int gpu);
  int bound_of(StreamSlots& st, double f, double level);
  int bound_for(const Unit& u, double f);
  void hbm_change(int gpu, int unit, double ask);
  TimeNs slot_kernel_ns(const StreamSlots& st, std::size_t k, double f, int bound) const;
  int sms_of(const Op& op) const {
    return core::comm_kernel_sms(
        scenario_.cluster.gpu,
        op.group >= 0 ? &program_.groups[static_cast<std::size_t>(op.group)] : nullptr, op);
  }
  void push(TimeNs t, Ev type, std::int64_t subject, std::uint32_t gen = 0) {
    events_.push(t, Event{type, gen, subject});
  }
  TimeNs time_of(const Unit& u, int j) const {
    const StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
    const TimeNs c =
        st.pc[static_cast<std::size_t>(j)] - st.pc[static_cast<std::size_t>(u.seg_pos)];
    const TimeNs m =
        st.pm[static_cast<std::size_t>(j)] - st.pm[static_cast<std::size_t>(u.seg_pos)];
    if (u.bound >= 0) {
      const std::vector<double>& b = st.bound[static_cast<std::size_t>(u.bound)].prefix;
      return u.t0 +
             static_cast<TimeNs>(std::llround(b[static_cast<std::size_t>(j)] -
                                              b[static_cast<std::size_t>(u.seg_pos)])) +
             m;
    }
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
  std::vector<GpuPeak> gpu_peaks() const;
  std::optional<MemVerdict> scan_memory(std::vector<GpuPeak>& peaks,
                                        const std::vector<Bytes>& lower) const;
  EvalResult figures(std::vector<GpuPeak> peaks) const;  // peaks: scan_memory's
};

// docs/block-eval.md, "Out of memory before the last forward": the OOM verdict of `scenario` (m
// micro-batches) from `x`, the block path's run of `short_program`, the same configuration with
// m_short < m micro-batches (`peaks`: its figures' GPUs), where the argument there holds (else
// nullopt, *why says which part fails).
std::optional<Oom> prefix_verdict(const core::Scenario& scenario,
                                  const core::Program& short_program, std::int64_t m_short,
                                  const Schedule& x, const std::vector<GpuPeak>& peaks,
                                  std::string* why);

}  // namespace csim::block::detail
