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
// gradient dtype allocated once (stage3.py, __ipg_bucket_flat_buffer) and never freed.
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

// [SECTION] Lowering ------------------------------------------------------------------------------

namespace hybrid {
namespace {

// Host cost, in framework ops (docs/program.md, "Host costs": each op python_us_per_op +
// dispatch_us_per_op), counted from DeepSpeed's source (docs/program.md, "ZeRO-3 parameter
// fetch"): a use is fetch_sub_module's wait_stream, the fetch event's record and
// release_sub_module's partition() of the weight (3); an all-gather is torch.empty of its buffer,
// the shard's .to(device) and the narrow/view of param.data (3, plus the collective itself); a
// coalesced handle's wait() narrows and record_streams every rank's part of each parameter and
// cats them (2p + 2 per module).
constexpr double kUseOps = 3;
constexpr double kGatherOps = 3;

class Zero3Piece final : public ParallelPiece {
 public:
  explicit Zero3Piece(Emitter& e) : e_(e), b_(e.builder()), z_(e.spec().zero3) {}

  void add_streams(RankState& r) override {
    if (numel_.empty()) {
      // The plan exists from the rank layout on.
      for (const ShardedLayer& sl : e_.plan().sharded) {
        numel_.push_back(sl.params > z_.persistence_threshold_numel ? sl.params : 0);
        grads_.push_back(sl.params);
      }
    }
    RankData& d = data(r);
    d.gather_stream =
        z_.overlap_comm ? b_.add_stream(r.gpu, StreamRole::kComm, "allgather") : r.compute;
    d.reduce_stream = z_.overlap_comm ? r.dp : r.compute;
  }

  void begin_step(StepState& st) override {
    RankData& d = data(st.r);
    if (!d.coord) d.coord = std::make_unique<Zero3Coordinator>(z_, numel_);
    d.bucket_numel = 0;
    const Bytes ipg = z_.reduce_bucket_numel * deepspeed_grad_bytes(e_.precision());
    if (b_.step() == 1 && e_.spec().dp > 1 && ipg > 0) {
      b_.alloc(st.r.thread, st.r.compute, st.r.gpu, MemCategory::kCommBuffers, ipg,
               "ipg bucket (reduce_bucket_size)");
    }
  }

  void begin_segment(SegmentPass& sp) override {
    if (sp.forward && !sp.eval) data(sp.st.r).coord->reset_step();
  }

  void begin_layer(LayerPass& lp) override {
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
      b_.host_work(r.thread, r.gpu, "zero3 prefetch", b_.python_ns(kGatherOps),
                   b_.dispatch_ns(kGatherOps), {}, phase);
      gather(r, d, first + static_cast<int>(g), u.gathers[g], phase);
    }
    if (u.tail >= 0 && d.gather_stream != r.compute)
      lp.deps.push_back({d.gather_op[static_cast<std::size_t>(u.tail)], DepKind::kStreamWaits});
  }

  void end_layer(LayerPass& lp) override {
    RankState& r = lp.r();
    RankData& d = data(r);
    if (is_use(lp) && d.coord->release(lp.layer, !lp.sp.eval)) free(r, lp.layer);
    if (lp.phase != StepPhase::kBackward || e_.spec().dp <= 1) return;
    const std::int64_t n = grads_[static_cast<std::size_t>(lp.layer)];
    if (n <= 0) return;
    if (d.bucket_numel > 0 && d.bucket_numel + n > z_.reduce_bucket_numel) reduce(lp.sp, d);
    d.bucket_numel += n;
  }

  void end_segment(SegmentPass& sp) override {
    if (sp.forward) return;
    RankData& d = data(sp.st.r);
    if (d.bucket_numel > 0) reduce(sp, d);
  }

  void end_backward(StepState& st) override {
    // The step's last backward done: whatever the reuse distance kept is freed.
    RankData& d = data(st.r);
    for (int m : d.coord->release_all()) free(st.r, m);
  }

 private:
  struct RankData {
    std::unique_ptr<Zero3Coordinator> coord;
    int gather_stream = 0, reduce_stream = 0;
    std::vector<OpId> gather_op;    // per gather serial
    std::int64_t bucket_numel = 0;  // gradient elements in the IPG bucket
  };
  Emitter& e_;
  ProgramBuilder& b_;
  const Zero3Spec& z_;
  std::vector<std::int64_t> numel_;  // per layer: gathered elements (0: none, or persistent)
  std::vector<std::int64_t> grads_;  // per layer: gradient elements
  std::vector<RankData> ranks_;

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
                           CollectiveKind::kAllGather, r.dp_group, bytes, {}, phase);
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
    d.bucket_numel = 0;
    const OpId rs = e_.coll(r, d.reduce_stream,
                            op_names::collective("zero", CollectiveKind::kReduceScatter, "grads"),
                            CollectiveKind::kReduceScatter, r.dp_group, bytes,
                            {{r.last_compute, DepKind::kStreamWaits}}, StepPhase::kBackward);
    b_.set_dtype(rs, b_.weights_dtype());  // DeepSpeed reduces in the model dtype
    sp.st.optimizer_waits.push_back({rs, DepKind::kStreamWaits});
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_zero3_piece(Emitter& e) {
  return std::make_unique<Zero3Piece>(e);
}

}  // namespace hybrid
}  // namespace csim::core
