// DeepSpeed ZeRO-3 (kind zero, zero_stage 3): the parameter coordinator (zero3_fetch.hpp) and
// the Zero3Piece that lowers it (docs/program.md, "ZeRO-3 parameter fetch"). The piece takes the
// sharding piece's place for DeepSpeed's stage 3 (hybrid_3d.cpp); ZeRO-1/2 and FSDP1 keep
// zero_fsdp.cpp's per-unit gathers.
//
// Per rank (one DeepSpeed engine each), per use of a module (a layer's forward, its forward
// re-run under recompute, its backward when it is not re-run):
//   host    one host op of (kUseOps + per all-gather issued kGatherOps + per coalesced wait
//           (2p + 2) per module) framework ops, p the data-parallel group size (below);
//           a kHostWaits dep on the gather DeepSpeed's fetch events synchronize on
//   gathers on the all-gather stream (overlap_comm; else the compute stream), one per
//           Zero3Use gather: W x elements over the data-parallel group, "gathered params"
//           allocated per module and freed when the coordinator releases it
//   kernel  waits for the latest all-gather issued (wait_stream)
// Gradients (stage3.py, reduce_independent_p_g_buckets_and_remove_grads): after each layer's
// backward its gradients join the bucket; when bucket + layer elements would exceed
// reduce_bucket_size the bucket is reduce-scattered first (on the dp stream under overlap_comm,
// else the compute stream), and what is left at the end of a backward pass is reduce-scattered
// then. The bucket is DeepSpeed's contiguous IPG buffer: reduce_bucket_size elements of the
// gradient dtype allocated once (stage3.py, __ipg_bucket_flat_buffer) and never freed. Before the
// reduce-scatter the host runs reduce_scatter_coalesced's per-rank slicing of every tensor in the
// bucket (reduce_prep_ops, below): T (p + 1) + 3 framework ops, then 5 T after it.
//
// zero3_fetch "synchronous" (DeepSpeed 0.3.13 - 0.5.10; the piece's "Synchronous fetch" section)
// lowers the older coordinator (Zero3SyncCoordinator), whose every fetch waits for the whole
// device, and its per-tensor all-gathers and reduce-scatters with their per-rank loops.
#include "core/lowering/zero3_fetch.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/optimizer_memory.hpp"

namespace csim::core {

// [SECTION] Coordinator ---------------------------------------------------------------------------

Zero3Coordinator::Zero3Coordinator(const Zero3Spec& z, std::vector<std::int64_t> numel)
    : z_(z), numel_(std::move(numel)) {
  status_.assign(numel_.size(), Status::kNotAvailable);
  handle_.assign(numel_.size(), -1);
  popped_.assign(numel_.size(), -1);
}

void Zero3Coordinator::reset_step() {
  // partitioned_param_coordinator.py, reset_step: invalid -> record -> complete; the queue is
  // the whole trace again and no use has been popped.
  if (mode_ == Mode::kRecord && !trace_.empty()) mode_ = Mode::kComplete;
  if (mode_ == Mode::kInvalid) mode_ = Mode::kRecord;
  pos_ = 0;
  queue_ = 0;
  std::fill(popped_.begin(), popped_.end(), -1);
  ongoing_.clear();
}

int Zero3Coordinator::issue(const std::vector<int>& mods) {
  // __all_gather_params_: the modules go in flight, their elements count as live.
  const int serial = serials_++;
  handle_done_.push_back(0);
  modules_.push_back(mods);
  for (int m : mods) {
    status_[static_cast<std::size_t>(m)] = Status::kInflight;
    handle_[static_cast<std::size_t>(m)] = serial;
    live_ += numel_[static_cast<std::size_t>(m)];
  }
  return serial;
}

Zero3Use Zero3Coordinator::use(int m, bool traced) {
  const auto um = static_cast<std::size_t>(m);
  CSIM_ASSERT(numel_[um] > 0);
  Zero3Use u;
  const bool replay = traced && mode_ == Mode::kComplete;
  if (traced && mode_ == Mode::kRecord) trace_.push_back(m);
  if (replay) {
    CSIM_ASSERT(pos_ < trace_.size() && trace_[pos_] == m);
  }
  // 1. On demand.
  if (status_[um] == Status::kNotAvailable) {
    u.gathers.push_back({m});
    u.on_demand = true;
    issue({m});
  }
  // 2. The wait: host-side fetch events (at most 2 outstanding), then wait() on the handle.
  if (status_[um] == Status::kInflight) {
    if (ongoing_.size() > 2) {
      u.host_sync = ongoing_.front();
      ongoing_.erase(ongoing_.begin());
    }
    const int h = handle_[um];
    if (!handle_done_[static_cast<std::size_t>(h)]) {
      handle_done_[static_cast<std::size_t>(h)] = 1;
      u.handle_waited = h;
    }
    ongoing_.push_back(serials_ - 1);  // event.record() at the all-gather stream's tail
    status_[um] = Status::kAvailable;
    handle_[um] = -1;
  }
  // 3. wait_stream: the compute stream waits for every gather issued so far.
  u.tail = serials_ - 1;
  if (!replay) {
    use_pos_ = 0;
    return u;
  }
  // 4. Pop the current use off the queue unless a prefetch popped it, then prefetch.
  if (popped_[um] < static_cast<std::int64_t>(pos_) && queue_ <= pos_) {
    popped_[um] = static_cast<std::int64_t>(pos_);
    queue_ = pos_ + 1;
  }
  if (z_.prefetch_bucket_numel > 0) {
    const std::int64_t budget = std::min(z_.max_live_numel - live_, z_.prefetch_bucket_numel);
    std::vector<int> set;
    std::int64_t numel = 0;
    while (queue_ < trace_.size() && numel < budget) {
      const int j = trace_[queue_];
      const auto uj = static_cast<std::size_t>(j);
      popped_[uj] = std::max(popped_[uj], static_cast<std::int64_t>(queue_));
      ++queue_;
      if (status_[uj] == Status::kNotAvailable &&
          std::find(set.begin(), set.end(), j) == set.end()) {
        set.push_back(j);
        numel += numel_[uj];
      }
    }
    if (!set.empty()) {
      u.gathers.push_back(set);
      issue(set);
    }
  }
  use_pos_ = pos_++;
  return u;
}

void Zero3Coordinator::free_module(int m) {
  const auto um = static_cast<std::size_t>(m);
  if (status_[um] == Status::kNotAvailable) return;
  status_[um] = Status::kNotAvailable;
  handle_[um] = -1;
  live_ -= numel_[um];
}

bool Zero3Coordinator::release(int m, bool traced) {
  const auto um = static_cast<std::size_t>(m);
  if (status_[um] != Status::kAvailable) return false;
  if (traced && mode_ == Mode::kComplete) {
    // __params_to_release: kept if a prefetch popped a later use of m, or if m is used again
    // within max_reuse_distance elements of the trace after this use.
    if (popped_[um] > static_cast<std::int64_t>(use_pos_)) return false;
    std::int64_t traversed = 0;
    for (std::size_t k = use_pos_ + 1; k < trace_.size(); ++k) {
      if (traversed >= z_.max_reuse_distance_numel) break;
      if (trace_[k] == m) return false;
      traversed += numel_[static_cast<std::size_t>(trace_[k])];
    }
  }
  free_module(m);
  return true;
}

std::vector<int> Zero3Coordinator::release_all() {
  std::vector<int> freed;
  for (std::size_t m = 0; m < status_.size(); ++m) {
    if (status_[m] == Status::kAvailable) freed.push_back(static_cast<int>(m));
    free_module(static_cast<int>(m));
  }
  return freed;
}

// [SECTION] Coordinator before DeepSpeed 0.6.0 ---------------------------------------------------
// deepspeed/runtime/zero/stage3.py at v0.3.14 (0cd9abf20416c1fce091e7f79694f02fd21b3687); line
// numbers of that file.

Zero3SyncCoordinator::Zero3SyncCoordinator(const Zero3Spec& z, std::vector<std::int64_t> numel,
                                           std::vector<std::int64_t> params)
    : z_(z), numel_(std::move(numel)), params_(std::move(params)) {
  CSIM_ASSERT(numel_.size() == params_.size());
  status_.assign(numel_.size(), Status::kNotAvailable);
}

void Zero3SyncCoordinator::begin_step(int step) {
  // record_trace appends until finish_tracing, which the first optimizer step's _pre_step calls
  // (lines 2240-2251): step 1 records every use, across its micro-batches.
  recording_ = step == 1;
  complete_ = step > 1 && !trace_.empty();
}

void Zero3SyncCoordinator::reset_step() {
  pos_ = 0;  // _pre_forward_hook -> reset_step (lines 1041-1043, 184-185)
}

void Zero3SyncCoordinator::gather(int m) {
  const auto um = static_cast<std::size_t>(m);
  status_[um] = Status::kInflight;
  live_ += numel_[um];  // _increment_available_parameter_numel
  ++inflight_;
}

Zero3SyncUse Zero3SyncCoordinator::use(int m, bool traced) {
  const auto um = static_cast<std::size_t>(m);
  CSIM_ASSERT(params_[um] > 0);
  Zero3SyncUse u;
  if (traced && recording_) trace_.push_back(m);
  const bool replay = traced && complete_;
  if (replay) CSIM_ASSERT(pos_ < trace_.size() && trace_[pos_] == m);
  // fetch_sub_module (357-411): gather what is not available, then synchronize if anything of
  // the module was gathered or is in flight (_synchronize_communication, 483-491: every handle).
  if (numel_[um] > 0) {
    const bool in_flight = status_[um] == Status::kInflight;
    if (status_[um] == Status::kNotAvailable) {
      u.fetch = true;
      gather(m);
    }
    if (u.fetch || in_flight) {
      u.synchronize = true;
      u.handles = inflight_;
      inflight_ = 0;
      for (Status& st : status_)
        if (st == Status::kInflight) st = Status::kAvailable;
    }
  }
  // prefetch_next_sub_modules (312-334): a finished trace, no handle in flight, fewer than
  // max_live gathered elements; get_params_to_prefetch (188-219) walks the trace from this use.
  if (replay && inflight_ == 0 && live_ < z_.max_live_numel && z_.prefetch_bucket_numel > 0) {
    std::int64_t total = 0;
    for (std::size_t k = pos_; k < trace_.size() && total < z_.prefetch_bucket_numel; ++k) {
      const int j = trace_[k];
      const auto uj = static_cast<std::size_t>(j);
      if (numel_[uj] == 0 || status_[uj] != Status::kNotAvailable) continue;
      u.prefetch.push_back(j);
      gather(j);
      total += numel_[uj];
    }
  }
  use_pos_ = pos_;
  if (traced) ++pos_;  // increment_step (347-348)
  return u;
}

bool Zero3SyncCoordinator::release(int m, bool traced) {
  const auto um = static_cast<std::size_t>(m);
  if (numel_[um] == 0 || status_[um] != Status::kAvailable) return false;
  if (traced && complete_) {
    // _keep_for_later (464-470): kept if m's next use in the trace is within max_reuse_distance
    // elements: the parameters of every module used from the next position up to it
    // (get_reuse_distance_in_numel 222-261, _distance_in_numel 263-271).
    std::int64_t distance = 0;
    for (std::size_t k = use_pos_ + 1; k < trace_.size(); ++k) {
      if (trace_[k] == m) {
        if (distance < z_.max_reuse_distance_numel) return false;
        break;
      }
      distance += params_[static_cast<std::size_t>(trace_[k])];
    }
  }
  status_[um] = Status::kNotAvailable;
  live_ -= numel_[um];  // _decrement_available_parameter_numel
  return true;
}

std::vector<int> Zero3SyncCoordinator::release_all() {
  std::vector<int> freed;
  for (std::size_t m = 0; m < status_.size(); ++m) {
    if (status_[m] == Status::kNotAvailable) continue;
    freed.push_back(static_cast<int>(m));  // in flight too: its buffer exists
    status_[m] = Status::kNotAvailable;
    live_ -= numel_[m];
  }
  inflight_ = 0;
  return freed;
}

// [SECTION] Lowering ------------------------------------------------------------------------------

namespace hybrid {
namespace {

// Host cost, in framework ops (docs/program.md, "Host costs": each op python_us_per_op +
// dispatch_us_per_op), counted from DeepSpeed's source (docs/program.md, "ZeRO-3 parameter
// fetch"): a use is fetch_sub_module's wait_stream, the fetch event's record and
// release_sub_module's partition() of the weight (3); an all-gather is torch.empty of its buffer,
// the shard's .to(device) and the narrow/view of param.data (3, plus the collective itself); a
// coalesced all-gather of k >= 2 modules narrows the flat buffer once per rank first
// (_all_gather_dtype: p more) and its handle's wait() narrows and record_streams every rank's
// part of each parameter and cats them (2p + 2 per module).
constexpr double kUseOps = 3;
constexpr double kGatherOps = 3;
// The reduce-scatter of a bucket of T gradient tensors (stage3.py __avg_scatter_grads ->
// coalesced_collectives.py reduce_scatter_coalesced, lines 158-218 at DeepSpeed
// 38327e07f6cd39b63418f60cedd1651b0be3e7c3): before it, per tensor a view and one slice per
// rank (p), then cat, div_ and chunk: T (p + 1) + 3; after it, per tensor a narrow and
// partition_grads' narrow, copy_, .to and record_stream (stage3.py 1466-1520): 5 T.
double reduce_prep_ops(double tensors, double p) {
  return tensors * (p + 1) + 3;
}
constexpr double kReduceAfterOpsPerTensor = 5;

// DeepSpeed 0.3.13 - 0.5.10 (zero3_fetch "synchronous"), counted in v0.3.14
// (0cd9abf20416c1fce091e7f79694f02fd21b3687), partition_parameters.py and stage3.py:
//   _allgather_param (pp 610-650), per gathered tensor: torch.zeros of the full buffer (1) and its
//     fill kernel; torch.cuda.synchronize() (625); one narrow per rank and the shard's copy_
//     (p + 1); torch.distributed.all_gather into the p-tensor list (1), which PyTorch's
//     ProcessGroupNCCL runs as one all-gather into a flat buffer followed by p copy_ calls from
//     C++ (dispatch only) into the list, one copy kernel each; param.data = narrow().view() (2).
//   _synchronize_communication (stage3 483-491): handle.wait() per handle, then
//     comm_stream.synchronize() and torch.cuda.synchronize() (2).
//   release_sub_module's partition (pp 509-598): param.data = torch.ones(1).half().to() (3).
//   _reduce_scatter_gradient (pp 747-785), per gradient tensor: one narrow per rank (p), the
//     torch.distributed.reduce_scatter call (1; ProcessGroupNCCL first copies the p-tensor list
//     into a flat buffer: p dispatch-only copy_ calls, one copy kernel each), handle.wait() (1).
//   reduce_ipg_grads (stage3 1695-1726): reduction_stream.synchronize(), then
//     partition_previous_reduced_grads (1612-1693: per tensor ~10 ops of narrow / view / copy_ in
//     _partition_gradient, pp 796-860) and average_tensor's div_ of the bucket (1502-1517).
//   _post_step (stage3 2345-2355): all_gather of every persistent tensor (_allgather_params,
//     pp 652-714): torch.empty (1), one narrow per rank (p), the all-gather (1, + p copies), then
//     per tensor torch.empty (1) and per rank narrow, view, narrow, copy_ (4 p).
constexpr double kSyncZerosOps = 1;
constexpr double kSyncAfterGatherOps = 2;
constexpr double kSyncWaitOps = 2;
constexpr double kSyncReleaseOps = 3;
constexpr double kSyncPartitionGradOps = 10;

// A layer's parameter tensors (LayerSpec::second_tensor_params): one, or a big one and a second.
std::vector<std::int64_t> tensors_of(const ShardedLayer& sl) {
  if (sl.params <= 0) return {};
  if (sl.second_tensor_params <= 0 || sl.second_tensor_params >= sl.params) return {sl.params};
  return {sl.params - sl.second_tensor_params, sl.second_tensor_params};
}

class Zero3Piece final : public ParallelPiece {
 public:
  explicit Zero3Piece(Emitter& e) : e_(e), b_(e.builder()), z_(e.spec().zero3) {}

  void add_streams(RankState& r) override {
    if (params_.empty()) {
      // The plan exists from the rank layout on.
      for (const ShardedLayer& sl : e_.plan().sharded) {
        params_.push_back(sl.params);
        tensors_.push_back(tensors_of(sl));
        if (sync()) {
          // stage3.py v0.3.14 persistent_parameters (1054-1066): a tensor with fewer than
          // stage3_param_persistence_threshold elements stays gathered; the module gathers the
          // others.
          std::int64_t n = 0;
          std::vector<std::int64_t> g;
          for (std::int64_t t : tensors_.back()) {
            if (t < z_.persistence_threshold_numel) {
              persistent_numel_ += t;
              ++persistent_tensors_;
            } else {
              n += t;
              g.push_back(t);
            }
          }
          numel_.push_back(n);
          gathered_.push_back(std::move(g));
        } else {
          numel_.push_back(sl.params > z_.persistence_threshold_numel ? sl.params : 0);
        }
      }
    }
    RankData& d = data(r);
    d.gather_stream =
        z_.overlap_comm ? b_.add_stream(r.gpu, StreamRole::kComm, "allgather") : r.compute;
    d.reduce_stream = z_.overlap_comm ? r.stream[ParallelDim::kDp] : r.compute;
  }

  void begin_step(StepState& st) override {
    RankData& d = data(st.r);
    if (sync()) {
      if (!d.sync) d.sync = std::make_unique<Zero3SyncCoordinator>(z_, numel_, params_);
      d.sync->begin_step(b_.step());
      d.input_copy = st.in.copy;
      d.bucket_numel = 0;
      d.bucket_tensors.clear();
      d.previous_tensors = 0;
      return;
    }
    if (!d.coord) d.coord = std::make_unique<Zero3Coordinator>(z_, numel_);
    d.bucket_numel = 0;
    d.bucket_tensors.clear();
    const Bytes ipg = z_.reduce_bucket_numel * deepspeed_grad_bytes(e_.precision());
    if (b_.step() == 1 && e_.spec().dp > 1 && ipg > 0) {
      b_.alloc(st.r.thread, st.r.compute, st.r.gpu, MemCategory::kCommBuffers, ipg,
               "ipg bucket (reduce_bucket_size)");
    }
  }

  void begin_segment(SegmentPass& sp) override {
    RankData& d = data(sp.st.r);
    if (sync()) {
      if (sp.forward && !sp.eval) d.sync->reset_step();
      // stage3.py v0.3.14 backward (2527-2553): with contiguous_gradients the IPG buffer, two
      // under overlap_comm (double-buffered), allocated before every backward pass and released by
      // the epilogue (independent_gradient_partition_epilogue, 1286-1320).
      if (!sp.forward && e_.spec().dp > 1) {
        RankState& r = sp.st.r;
        b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, ipg_bytes(),
                 "ipg buffers (reduce_bucket_size)");
      }
      return;
    }
    if (sp.forward && !sp.eval) d.coord->reset_step();
  }

  void begin_layer(LayerPass& lp) override {
    if (sync()) {
      sync_begin_layer(lp);
      return;
    }
    const int i = lp.layer;
    if (!is_use(lp)) return;
    RankState& r = lp.r();
    RankData& d = data(r);
    const bool traced = !lp.sp.eval;
    const Zero3Use u = d.coord->use(i, traced);
    const StepPhase phase = lp.phase;
    const double p = e_.spec().dp;
    double ops = kUseOps;
    if (u.handle_waited >= 0) {
      const auto& mods = d.coord->gather_modules(u.handle_waited);
      if (mods.size() > 1) ops += static_cast<double>(mods.size()) * (2 * p + 2);
    }
    std::vector<Dep> host;
    if (u.host_sync >= 0)
      host.push_back({d.gather_op[static_cast<std::size_t>(u.host_sync)], DepKind::kHostWaits});
    // Serials of this use's gathers: the last u.gathers.size() the coordinator issued.
    const int first = d.coord->gathers_issued() - static_cast<int>(u.gathers.size());
    std::size_t g = 0;
    if (u.on_demand) {
      // fetch_sub_module: the module's own gather goes out before the host synchronizes.
      b_.host_work(r.thread, r.gpu, "zero3 fetch", b_.python_ns(kUseOps + kGatherOps),
                   b_.dispatch_ns(kUseOps + kGatherOps), {}, phase);
      gather(r, d, first, u.gathers[g], phase);
      ++g;
      ops -= kUseOps;
    }
    if (ops > 0 || !host.empty())
      b_.host_work(r.thread, r.gpu, "zero3 fetch wait", b_.python_ns(ops), b_.dispatch_ns(ops),
                   std::move(host), phase);
    for (; g < u.gathers.size(); ++g) {
      // A coalesced gather narrows its flat buffer once per rank before the collective.
      const double issue = kGatherOps + (u.gathers[g].size() > 1 ? p : 0.0);
      b_.host_work(r.thread, r.gpu, "zero3 prefetch", b_.python_ns(issue), b_.dispatch_ns(issue),
                   {}, phase);
      gather(r, d, first + static_cast<int>(g), u.gathers[g], phase);
    }
    if (u.tail >= 0 && d.gather_stream != r.compute)
      lp.deps.push_back({d.gather_op[static_cast<std::size_t>(u.tail)], DepKind::kStreamWaits});
  }

  void end_layer(LayerPass& lp) override {
    if (sync()) {
      sync_end_layer(lp);
      return;
    }
    RankState& r = lp.r();
    RankData& d = data(r);
    if (is_use(lp) && d.coord->release(lp.layer, !lp.sp.eval)) free(r, lp.layer);
    if (lp.phase != StepPhase::kBackward || e_.spec().dp <= 1) return;
    const auto ul = static_cast<std::size_t>(lp.layer);
    const std::int64_t n = params_[ul];
    if (n <= 0) return;
    if (d.bucket_numel > 0 && d.bucket_numel + n > z_.reduce_bucket_numel) reduce(lp.sp, d);
    d.bucket_numel += n;
    for (std::int64_t t : tensors_[ul]) d.bucket_tensors.push_back(t);
  }

  void end_segment(SegmentPass& sp) override {
    if (sp.forward) return;
    RankData& d = data(sp.st.r);
    if (sync()) {
      sync_end_backward_pass(sp);
      return;
    }
    if (d.bucket_numel > 0) reduce(sp, d);
  }

  void end_backward(StepState& st) override {
    // The step's last backward done: whatever the reuse distance kept is freed.
    RankData& d = data(st.r);
    if (sync()) {
      for (int m : d.sync->release_all()) sync_free(st.r, m, StepPhase::kBackward);
      return;
    }
    for (int m : d.coord->release_all()) free(st.r, m);
  }

  void end_optimizer(StepState& st, OpId& last) override {
    if (sync()) sync_post_step(st, last);
  }

 private:
  struct RankData {
    std::unique_ptr<Zero3Coordinator> coord;
    std::unique_ptr<Zero3SyncCoordinator> sync;
    int gather_stream = 0, reduce_stream = 0;
    std::vector<OpId> gather_op;               // per gather serial
    std::int64_t bucket_numel = 0;             // gradient elements in the IPG bucket
    std::vector<std::int64_t> bucket_tensors;  // their tensors' elements
    std::size_t previous_tensors = 0;          // synchronous: tensors reduced by the last bucket
    OpId gather_last = kNoOp, reduce_last = kNoOp;  // synchronous: each stream's last op
    OpId input_copy = kNoOp;                        // synchronous: the step's input batch copy
  };
  Emitter& e_;
  ProgramBuilder& b_;
  const Zero3Spec& z_;
  std::vector<std::int64_t> numel_;   // per layer: gathered elements (0: none, or persistent)
  std::vector<std::int64_t> params_;  // per layer: parameter (and gradient) elements
  std::vector<std::vector<std::int64_t>> tensors_;   // per layer: its parameter tensors
  std::vector<std::vector<std::int64_t>> gathered_;  // synchronous: per layer, those gathered
  std::int64_t persistent_numel_ = 0;                // synchronous: persistent tensors' elements
  std::int64_t persistent_tensors_ = 0;
  std::vector<RankData> ranks_;

  bool sync() const { return z_.fetch == Zero3Fetch::kSynchronous; }

  RankData& data(const RankState& r) {
    if (ranks_.size() <= static_cast<std::size_t>(r.rank))
      ranks_.resize(static_cast<std::size_t>(r.rank) + 1);
    return ranks_[static_cast<std::size_t>(r.rank)];
  }

  // A use: every pass through a gathered module: its forward (or evaluation forward), its
  // forward re-run under recompute, its backward (DeepSpeed's pre-backward hook fetches too).
  // The piece sits inside the recompute piece (hybrid_3d.cpp), so a block's re-runs are used
  // before the backward of its last layer.
  bool is_use(const LayerPass& lp) const {
    return numel_[static_cast<std::size_t>(lp.layer)] > 0 && e_.spec().dp > 1;
  }

  void gather(RankState& r, RankData& d, int serial, const std::vector<int>& mods,
              StepPhase phase) {
    Bytes bytes = 0;
    for (int m : mods) {
      const Bytes mb = numel_[static_cast<std::size_t>(m)] * e_.precision().weights;
      b_.alloc(r.thread, d.gather_stream, r.gpu, MemCategory::kCommBuffers, mb, "gathered params");
      bytes += mb;
    }
    const OpId g = e_.coll(r, d.gather_stream,
                           op_names::collective("zero", CollectiveKind::kAllGather, "params"),
                           CollectiveKind::kAllGather, r.group[ParallelDim::kDp], bytes, {}, phase);
    b_.set_dtype(g, b_.weights_dtype());
    if (d.gather_op.size() <= static_cast<std::size_t>(serial))
      d.gather_op.resize(static_cast<std::size_t>(serial) + 1, kNoOp);
    d.gather_op[static_cast<std::size_t>(serial)] = g;
  }

  void free(RankState& r, int m) {
    const Bytes mb = numel_[static_cast<std::size_t>(m)] * e_.precision().weights;
    const OpId f =
        b_.release(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, mb, "gathered params");
    // partition_parameters.py, free_param: param.data.record_stream(current_stream()) before
    // the storage is dropped (docs/memory.md, "Allocation backpressure").
    b_.program().ops[static_cast<std::size_t>(f)].record_stream = true;
  }

  void reduce(SegmentPass& sp, RankData& d) {
    RankState& r = sp.st.r;
    const Bytes bytes = d.bucket_numel * deepspeed_grad_bytes(e_.precision());
    const double tensors = static_cast<double>(d.bucket_tensors.size());
    d.bucket_numel = 0;
    d.bucket_tensors.clear();
    // reduce_scatter_coalesced's per-rank slicing, on the thread that runs the backward hooks.
    const double prep = reduce_prep_ops(tensors, e_.spec().dp);
    b_.host_work(r.thread, r.gpu, "zero3 reduce_scatter_coalesced", b_.python_ns(prep),
                 b_.dispatch_ns(prep), {}, StepPhase::kBackward);
    const OpId rs = e_.coll(r, d.reduce_stream,
                            op_names::collective("zero", CollectiveKind::kReduceScatter, "grads"),
                            CollectiveKind::kReduceScatter, r.group[ParallelDim::kDp], bytes,
                            {{r.last_compute, DepKind::kStreamWaits}}, StepPhase::kBackward);
    b_.set_dtype(rs, b_.weights_dtype());  // DeepSpeed reduces in the model dtype
    const double after = kReduceAfterOpsPerTensor * tensors;
    b_.host_work(r.thread, r.gpu, "zero3 partition_grads", b_.python_ns(after),
                 b_.dispatch_ns(after), {}, StepPhase::kBackward);
    sp.st.optimizer_waits.push_back({rs, DepKind::kStreamWaits});
  }

  // [SECTION] Synchronous fetch (DeepSpeed 0.3.13 - 0.5.10) ---------------------------------------

  Bytes ipg_bytes() const {
    // stage3.py v0.3.14 backward (2540-2553): torch.half buffers of reduce_bucket_size.
    return z_.reduce_bucket_numel * 2 * (z_.overlap_comm ? 2 : 1);
  }

  // The host waits for every stream of the rank (torch.cuda.synchronize()).
  OpId device_sync(RankState& r, RankData& d, double ops, const char* name, StepPhase phase) {
    std::vector<Dep> waits;
    for (OpId o : {r.last_compute, d.gather_last, d.reduce_last, d.input_copy})
      if (o != kNoOp) waits.push_back({o, DepKind::kHostWaits});
    return b_.host_work(r.thread, r.gpu, name, b_.python_ns(ops), b_.dispatch_ns(ops),
                        std::move(waits), phase);
  }

  // _allgather_param of one tensor of `numel` elements (see the op counts above).
  void sync_gather_tensor(RankState& r, RankData& d, std::int64_t numel, StepPhase phase) {
    const double p = e_.spec().dp;
    const Bytes bytes = numel * e_.precision().weights;
    const Lane on_gather{r.thread, r.gpu, d.gather_stream};
    b_.alloc(r.thread, d.gather_stream, r.gpu, MemCategory::kCommBuffers, bytes, "gathered params");
    // torch.zeros: one fill kernel writing the buffer.
    d.gather_last = b_.compute(on_gather, "zero3 gathered params zeros", ComputeKind::kElementwise,
                               0, bytes, kSyncZerosOps, true, {}, phase);
    device_sync(r, d, 0, "zero3 torch.cuda.synchronize", phase);
    b_.host_work(r.thread, r.gpu, "zero3 all_gather partitions", b_.python_ns(p + 2),
                 b_.dispatch_ns(p + 2), {}, phase);
    // ProcessGroupNCCL: the all-gather into a flat output, then p copies into the list.
    b_.alloc(r.thread, d.gather_stream, r.gpu, MemCategory::kCommBuffers, bytes,
             "all_gather flat output");
    const OpId g = e_.coll(r, d.gather_stream,
                           op_names::collective("zero", CollectiveKind::kAllGather, "params"),
                           CollectiveKind::kAllGather, r.group[ParallelDim::kDp], bytes, {}, phase);
    b_.set_dtype(g, b_.weights_dtype());
    b_.host_work(r.thread, r.gpu, "zero3 all_gather copy-out", 0, b_.dispatch_ns(p), {}, phase);
    d.gather_last = b_.compute(on_gather, "zero3 all_gather copy-out", ComputeKind::kElementwise, 0,
                               2 * bytes, 0, false, {}, phase);
    b_.release(r.thread, d.gather_stream, r.gpu, MemCategory::kCommBuffers, bytes,
               "all_gather flat output");
    b_.host_work(r.thread, r.gpu, "zero3 param.data", b_.python_ns(kSyncAfterGatherOps),
                 b_.dispatch_ns(kSyncAfterGatherOps), {}, phase);
  }

  void sync_gather(RankState& r, RankData& d, int m, StepPhase phase) {
    for (std::int64_t t : gathered_[static_cast<std::size_t>(m)])
      sync_gather_tensor(r, d, t, phase);
  }

  void sync_free(RankState& r, int m, StepPhase phase) {
    const auto um = static_cast<std::size_t>(m);
    const double ops = kSyncReleaseOps * static_cast<double>(gathered_[um].size());
    b_.host_work(r.thread, r.gpu, "zero3 partition", b_.python_ns(ops), b_.dispatch_ns(ops), {},
                 phase);
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers,
               numel_[um] * e_.precision().weights, "gathered params");
  }

  void sync_begin_layer(LayerPass& lp) {
    const auto ul = static_cast<std::size_t>(lp.layer);
    if (params_[ul] <= 0 || e_.spec().dp <= 1) return;
    RankState& r = lp.r();
    RankData& d = data(r);
    const Zero3SyncUse u = d.sync->use(lp.layer, !lp.sp.eval);
    if (u.fetch) sync_gather(r, d, lp.layer, lp.phase);
    if (u.synchronize)
      device_sync(r, d, u.handles + kSyncWaitOps, "zero3 synchronize_communication", lp.phase);
    for (int m : u.prefetch) sync_gather(r, d, m, lp.phase);
  }

  void sync_end_layer(LayerPass& lp) {
    const auto ul = static_cast<std::size_t>(lp.layer);
    if (params_[ul] <= 0 || e_.spec().dp <= 1) return;
    RankState& r = lp.r();
    RankData& d = data(r);
    if (d.sync->release(lp.layer, !lp.sp.eval)) sync_free(r, lp.layer, lp.phase);
    if (lp.phase != StepPhase::kBackward) return;
    // reduce_independent_p_g_buckets_and_remove_grads (stage3 1437-1475), per gradient tensor.
    for (std::int64_t t : tensors_[ul]) {
      if (d.bucket_numel > 0 && d.bucket_numel + t > z_.reduce_bucket_numel)
        sync_reduce_ipg(lp.sp, d);
      d.bucket_numel += t;
      d.bucket_tensors.push_back(t);
    }
  }

  // reduce_ipg_grads (stage3 1695-1726) of the open bucket.
  void sync_reduce_ipg(SegmentPass& sp, RankData& d) {
    RankState& r = sp.st.r;
    const StepPhase phase = StepPhase::kBackward;
    const double p = e_.spec().dp;
    const int gbytes = deepspeed_grad_bytes(e_.precision());
    // reduction_stream.synchronize(), then the previous bucket's partitions.
    std::vector<Dep> waits;
    if (z_.overlap_comm && d.reduce_last != kNoOp)
      waits.push_back({d.reduce_last, DepKind::kHostWaits});
    const double prev = kSyncPartitionGradOps * static_cast<double>(d.previous_tensors);
    b_.host_work(r.thread, r.gpu, "zero3 reduce_ipg_grads", b_.python_ns(prev + 1),
                 b_.dispatch_ns(prev + 1), std::move(waits), phase);
    // average_tensor: div_ of the bucket on the reduction stream.
    const Lane on_reduce{r.thread, r.gpu, d.reduce_stream};
    d.reduce_last = b_.compute(on_reduce, "zero3 average_tensor div_", ComputeKind::kElementwise,
                               static_cast<double>(d.bucket_numel), 2 * d.bucket_numel * gbytes, 0,
                               false, {{r.last_compute, DepKind::kStreamWaits}}, phase);
    for (std::int64_t t : d.bucket_tensors) {
      const Bytes bytes = t * gbytes;
      b_.host_work(r.thread, r.gpu, "zero3 reduce_scatter partitions", b_.python_ns(p),
                   b_.dispatch_ns(2 * p), {}, phase);
      b_.alloc(r.thread, d.reduce_stream, r.gpu, MemCategory::kCommBuffers, bytes,
               "reduce_scatter flat input");
      b_.compute(on_reduce, "zero3 reduce_scatter copy-in", ComputeKind::kElementwise, 0, 2 * bytes,
                 0, false, {}, phase);
      const OpId rs = e_.coll(
          r, d.reduce_stream, op_names::collective("zero", CollectiveKind::kReduceScatter, "grads"),
          CollectiveKind::kReduceScatter, r.group[ParallelDim::kDp], bytes, {}, phase);
      b_.set_dtype(rs, b_.weights_dtype());
      b_.release(r.thread, d.reduce_stream, r.gpu, MemCategory::kCommBuffers, bytes,
                 "reduce_scatter flat input");
      d.reduce_last = rs;
      sp.st.optimizer_waits.push_back({rs, DepKind::kStreamWaits});
    }
    const double waits_ops = static_cast<double>(d.bucket_tensors.size());  // handle.wait()
    b_.host_work(r.thread, r.gpu, "zero3 reduce_scatter wait", b_.python_ns(waits_ops),
                 b_.dispatch_ns(waits_ops), {}, phase);
    d.previous_tensors = d.bucket_tensors.size();
    d.bucket_numel = 0;
    d.bucket_tensors.clear();
  }

  // independent_gradient_partition_epilogue (stage3 1286-1320): the last bucket, the reduction
  // stream's synchronize, the last partitions; the IPG buffers are released.
  void sync_end_backward_pass(SegmentPass& sp) {
    if (e_.spec().dp <= 1) return;
    RankState& r = sp.st.r;
    RankData& d = data(r);
    if (d.bucket_numel > 0) sync_reduce_ipg(sp, d);
    std::vector<Dep> waits;
    if (z_.overlap_comm && d.reduce_last != kNoOp)
      waits.push_back({d.reduce_last, DepKind::kHostWaits});
    const double ops = kSyncPartitionGradOps * static_cast<double>(d.previous_tensors) + 1;
    b_.host_work(r.thread, r.gpu, "zero3 gradient epilogue", b_.python_ns(ops), b_.dispatch_ns(ops),
                 std::move(waits), StepPhase::kBackward);
    d.previous_tensors = 0;
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, ipg_bytes(),
               "ipg buffers (reduce_bucket_size)");
  }

  // _post_step (stage3 2345-2355): every persistent tensor all-gathered after the update.
  void sync_post_step(StepState& st, OpId& last) {
    if (e_.spec().dp <= 1 || persistent_tensors_ == 0) return;
    RankState& r = st.r;
    const double p = e_.spec().dp;
    const double tensors = static_cast<double>(persistent_tensors_);
    const Bytes bytes = persistent_numel_ * e_.precision().weights;
    const StepPhase phase = StepPhase::kOptimizer;
    const double before = 1 + p;
    b_.host_work(r.thread, r.gpu, "zero3 persistent all_gather partitions", b_.python_ns(before),
                 b_.dispatch_ns(before), {}, phase);
    // Outside fetch_sub_module's comm_stream context: on the current (compute) stream.
    const OpId g =
        e_.coll(r, r.compute, op_names::collective("zero", CollectiveKind::kAllGather, "params"),
                CollectiveKind::kAllGather, r.group[ParallelDim::kDp], bytes,
                {{last, DepKind::kStreamWaits}}, phase);
    b_.set_dtype(g, b_.weights_dtype());
    // The flat output's p copies (C++), then per tensor and rank narrow, view, narrow, copy_.
    const double after = tensors * (1 + 4 * p);
    b_.host_work(r.thread, r.gpu, "zero3 persistent copy-out", b_.python_ns(after),
                 b_.dispatch_ns(after + p), {}, phase);
    const Lane on_compute{r.thread, r.gpu, r.compute};
    last = b_.compute(on_compute, "zero3 persistent copy-out", ComputeKind::kElementwise, 0,
                      4 * bytes, 0, false, {{g, DepKind::kStreamWaits}}, phase);
    r.last_compute = last;
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_zero3_piece(Emitter& e) {
  return std::make_unique<Zero3Piece>(e);
}

}  // namespace hybrid
}  // namespace csim::core
