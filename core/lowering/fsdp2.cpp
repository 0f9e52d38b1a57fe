// FSDP2 (PyTorch's fully_shard, per-parameter DTensor sharding) as torchtitan applies it, and
// Megatron-FSDP mapped onto it (docs/program.md, "FSDP2"). The piece takes the sharding piece's
// place in the composition (hybrid_3d.cpp) when strategy.fsdp2 is enabled; ZeRO and FSDP1 keep
// zero_fsdp.cpp.
//
// Units (torchtitan, torchtitan/models/llama3/infra/parallelize.py, apply_fsdp): fully_shard on
// every transformer block, then on the model, whose own unit (the root) holds what no block
// holds: the embedding, the final norm and the LM head. Under pipeline parallelism every model
// chunk is a root of its own, so a segment's embedding / head is its root. Other models: every
// layer with parameters is a unit, the root holds none.
//
// Per unit u of Psi_u parameters (after the TP split), S = dp / replicate shard ranks, W the
// gathered dtype (MixedPrecisionPolicy.param_dtype: the recipe's weight bytes), R = reduce_dtype:
//   all-gather  W Psi_u over the shard group before the unit's forward (the root: before the
//               segment's first layer), again before its backward if it was resharded; the next
//               unit's gather issued one ahead (FSDP2's implicit forward prefetch from its
//               separate all-gather stream, and its default backward prefetch of one unit)
//   reshard     after the forward where reshard_after_forward holds (torchtitan's default: every
//               block but the last; the root; nothing under pp), always after the backward that
//               reduces
//   reduce      the unit's unsharded gradients (R Psi_u, "unsharded grads") reduce-scattered
//               over the shard group after its backward (the root: after the segment's
//               backward), then with HSDP all-reduced (R ceil(Psi_u / S)) over the replicas
//   experts     under expert parallelism an MoE block's routed experts (Psi_e of its Psi_u,
//               E / ep experts) are sharded over the expert-data-parallel group instead
//               (torchtitan's efsdp mesh; expert_sharding.hpp): the unit's all-gather and
//               reduce-scatter split into W (Psi_u - Psi_e) / R (Psi_u - Psi_e) over the shard
//               group and W Psi_e / R Psi_e over edp, the unsharded buffers still W Psi_u / R Psi_u
//   under pp    torch.distributed.pipelining's stage runs every backward but the last with
//               set_reshard_after_backward(False) and set_requires_gradient_sync(False): a unit
//               is gathered once per step and its gradients, accumulated unsharded, are reduced
//               once, at the last micro-batch's backward (pipelining/stage.py,
//               backward_maybe_with_nosync)
#include <algorithm>

#include "core/lowering/expert_sharding.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

ModelStateBytes fsdp2_state_bytes(std::int64_t params, const TrainingSpec& t, int shard_ranks,
                                  bool megatron) {
  const int s = std::max(1, shard_ranks);
  if (megatron) return model_state_bytes(params, t, 3, s);
  const PrecisionBytes pb = precision_bytes(t.precision, t.amp_dtype);
  const std::int64_t shard = (params + s - 1) / s;  // ceil(Psi / S)
  const Bytes orig = pb.master > 0 ? pb.master : pb.weights;
  ModelStateBytes out;
  out.params = shard * orig;
  out.grads = shard * orig;
  out.optimizer = shard * (optimizer_bytes_per_param(t) - pb.master);
  return out;
}

namespace hybrid {
namespace {

class Fsdp2Piece final : public ParallelPiece {
 public:
  bool layer_hooks() const override { return false; }  // no begin_layer / end_layer
  explicit Fsdp2Piece(Emitter& e) : e_(e), b_(e.builder()), f_(e.spec().fsdp2) {}

  void add_groups() override {
    // HSDP (torchtitan's dp_replicate x dp_shard mesh, shard innermost): within each DP group,
    // shard groups of S consecutive DP ranks and replica groups of the ranks S apart.
    plan_units();  // the Emitter's plan exists from here on
    const int reps = f_.replicate, s = e_.spec().dp_cp() / reps;
    shard_group_.assign(e_.ranks().size(), -1);
    rep_group_.assign(e_.ranks().size(), -1);
    if (reps <= 1) return;
    // Over dp x cp (torchtitan's dp_shard_cp mesh: FSDP shards over the CP ranks too).
    const std::initializer_list<ParallelDim> dims{ParallelDim::kDp, ParallelDim::kCp};
    e_.grid().for_each_group(dims, [&](const std::vector<int>& rks, const RankCoord& at) {
      for (int k = 0; k < reps; ++k) {
        std::vector<int> g(rks.begin() + k * s, rks.begin() + (k + 1) * s);
        const int id = s > 1 ? e_.add_group(g, e_.group_name("fsdp shard", at, dims) + " replica " +
                                                   std::to_string(k))
                             : -1;
        for (int x : g) shard_group_[static_cast<std::size_t>(x)] = id;
      }
      for (int j = 0; j < s; ++j) {
        std::vector<int> g;
        for (int k = 0; k < reps; ++k) g.push_back(rks[static_cast<std::size_t>(k * s + j)]);
        const int id = e_.add_group(
            g, e_.group_name("fsdp replicate", at, dims) + " shard " + std::to_string(j));
        for (int x : g) rep_group_[static_cast<std::size_t>(x)] = id;
      }
    });
  }

  void begin_step(StepState& /*st*/) override {
    gathered_.assign(fu_params_.size(), 0);
    gather_op_.assign(fu_params_.size(), kNoOp);
    grads_open_.assign(fu_params_.size(), 0);
  }

  void begin_segment(SegmentPass& sp) override {
    if (sp.forward) copy_out_.clear();
  }

  void begin_unit(LayerPass& lp) override {
    RankState& r = lp.r();
    const int fu = fu_of_[static_cast<std::size_t>(lp.unit)];
    const bool fwd = lp.forward();
    const StepPhase phase = fwd ? StepPhase::kForward : StepPhase::kBackward;
    gather(r, fu, phase, kNoOp);
    // The unit's copy-out event (wait_for_unshard: foreach_all_gather_copy_out on the compute
    // stream, then all_gather_copy_out_event.record()): the compute stream's position before the
    // unit's first kernel.
    if (fwd && !lp.sp.eval) copy_out_.push_back(r.last_compute);
    // One unit ahead: the next in forward, the previous in backward (not in an evaluation pass).
    // Its all-gather streams wait on a copy-out event (_wait_all_gather_streams_on_event), which
    // bounds how far they run ahead of the compute stream: in forward on the previous unit's
    // (wait_for_unshard keeps the all-gather result until the next copy-out: implicit prefetch),
    // in backward on this unit's (freed right after its copy-out).
    if (e_.spec().prefetch && !lp.sp.eval) {
      const int nu = neighbour(lp.unit, lp.sp.sg, fwd ? 1 : -1);
      OpId event = kNoOp;
      if (!fwd) {
        event = r.last_compute;
      } else if (copy_out_.size() >= 2) {
        event = copy_out_[copy_out_.size() - 2];
      }
      if (nu >= 0) gather(r, fu_of_[static_cast<std::size_t>(nu)], phase, event);
    }
    const OpId g = gather_op_[static_cast<std::size_t>(fu)];
    if (g != kNoOp) lp.deps.push_back({g, DepKind::kStreamWaits});
    if (!fwd) open_grads(r, fu);
  }

  void end_unit(LayerPass& lp) override {
    const int fu = fu_of_[static_cast<std::size_t>(lp.unit)];
    if (fu_root_[static_cast<std::size_t>(fu)]) return;  // the root at the segment's end
    if (lp.forward()) {
      if (lp.sp.eval || fu_reshard_[static_cast<std::size_t>(fu)]) release(lp.r(), fu);
      return;
    }
    post_backward(lp.sp, fu);
  }

  void end_segment(SegmentPass& sp) override {
    const int fu = root_of_seg_[static_cast<std::size_t>(sp.seg)];
    if (fu < 0) return;
    if (sp.forward) {
      if (sp.eval || fu_reshard_[static_cast<std::size_t>(fu)]) release(sp.st.r, fu);
      return;
    }
    post_backward(sp, fu);
  }

 private:
  Emitter& e_;
  ProgramBuilder& b_;
  const Fsdp2Spec& f_;
  std::vector<int> fu_of_;               // per plan unit: its FSDP2 unit
  std::vector<std::int64_t> fu_params_;  // per FSDP2 unit
  std::vector<std::int64_t> fu_expert_;  // per FSDP2 unit: of fu_params_, the routed experts'
  std::vector<char> fu_root_, fu_reshard_;
  std::vector<int> root_of_seg_;              // per segment: its root unit, -1 if it has none
  std::vector<int> shard_group_, rep_group_;  // per rank (HSDP)
  std::vector<char> gathered_, grads_open_;
  std::vector<OpId> gather_op_;
  std::vector<OpId> copy_out_;  // this forward pass's units' copy-out events, in order

  void plan_units() {
    const Plan& plan = e_.plan();
    const ModelSpec& m = e_.scenario().model;
    const ParallelSpec& ps = e_.spec();
    const bool gpt = m.transformer.layers > 0;
    root_of_seg_.assign(plan.segs.size(), -1);
    for (const Unit& u : plan.units) {
      const int block = m.layers[static_cast<std::size_t>(u.first)].block;
      const bool root = gpt && block < 0;
      int seg = 0;
      while (plan.segs[static_cast<std::size_t>(seg)].end <= u.first) ++seg;
      int fu = root ? root_of_seg_[static_cast<std::size_t>(seg)] : -1;
      if (fu < 0) {
        fu = static_cast<int>(fu_params_.size());
        fu_params_.push_back(0);
        fu_expert_.push_back(0);
        fu_root_.push_back(root ? 1 : 0);
        // torchtitan's default: blocks but the last reshard, the root reshards, nothing under
        // pp ("to avoid per-microbatch all-gathers"); always / never as given.
        bool reshard = f_.reshard == ReshardPolicy::kAlways;
        if (f_.reshard == ReshardPolicy::kDefault)
          reshard = ps.pp == 1 && (root || !gpt || block < m.transformer.layers - 1);
        fu_reshard_.push_back(reshard ? 1 : 0);
        if (root) root_of_seg_[static_cast<std::size_t>(seg)] = fu;
      }
      fu_params_[static_cast<std::size_t>(fu)] += u.params;
      fu_expert_[static_cast<std::size_t>(fu)] += u.expert_params;
      fu_of_.push_back(fu);
    }
  }

  int shard_ranks() const { return e_.spec().dp_cp() / f_.replicate; }
  int shard_group(const RankState& r) const {
    return f_.replicate > 1 ? shard_group_[static_cast<std::size_t>(r.rank)]
                            : r.group[ParallelDim::kDp];
  }

  // The nearest plan unit from u in direction dir inside the segment whose FSDP2 unit differs.
  int neighbour(int u, Segment sg, int dir) const {
    const auto& units = e_.plan().units;
    const int fu = fu_of_[static_cast<std::size_t>(u)];
    for (int k = u + dir; k >= 0 && k < static_cast<int>(units.size()); k += dir) {
      const Unit& un = units[static_cast<std::size_t>(k)];
      if (un.end <= sg.first || un.first >= sg.end) return -1;
      if (fu_of_[static_cast<std::size_t>(k)] != fu) return k;
    }
    return -1;
  }

  // The unit's parts by sharding group: dense over the shard group, experts over edp.
  std::vector<UnitPart> parts(const RankState& r, int fu) const {
    return unit_parts(r, fu_params_[static_cast<std::size_t>(fu)],
                      fu_expert_[static_cast<std::size_t>(fu)], shard_group(r));
  }
  // The unsharded parameters' buffer: the parts that are gathered.
  Bytes param_bytes(const RankState& r, int fu) const {
    return sharded_params(parts(r, fu)) * e_.precision().weights;
  }
  Bytes grad_bytes(int fu) const {
    return fu_params_[static_cast<std::size_t>(fu)] * f_.reduce_bytes;
  }

  // `event`: a compute op the all-gather stream waits for first (kNoOp: none); the alloc waits
  // too, so the buffer is counted from when the stream may start the gather.
  void gather(RankState& r, int fu, StepPhase phase, OpId event) {
    if (gathered_[static_cast<std::size_t>(fu)]) return;
    gathered_[static_cast<std::size_t>(fu)] = 1;
    const Bytes bytes = param_bytes(r, fu);
    if (bytes == 0) return;
    const OpId a = b_.alloc(r.thread, r.stream[ParallelDim::kDp], r.gpu, MemCategory::kCommBuffers,
                            bytes, "fsdp2 unsharded params");
    if (event != kNoOp)
      b_.program().ops[static_cast<std::size_t>(a)].deps.push_back({event, DepKind::kStreamWaits});
    std::vector<Dep> deps;
    if (!e_.spec().prefetch && r.last_compute != kNoOp)
      deps.push_back({r.last_compute, DepKind::kStreamWaits});
    const OpId g =
        part_collectives(e_, r, parts(r, fu), "fsdp", CollectiveKind::kAllGather, "params",
                         e_.precision().weights, b_.weights_dtype(), std::move(deps), phase);
    gather_op_[static_cast<std::size_t>(fu)] = g;
  }

  void release(RankState& r, int fu) {
    if (!gathered_[static_cast<std::size_t>(fu)]) return;
    gathered_[static_cast<std::size_t>(fu)] = 0;
    gather_op_[static_cast<std::size_t>(fu)] = kNoOp;
    const Bytes bytes = param_bytes(r, fu);
    if (bytes == 0) return;
    b_.release(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, bytes,
               "fsdp2 unsharded params");
  }

  void open_grads(RankState& r, int fu) {
    // Reduced over dp x cp (HSDP's replicas included) or, the experts', over edp.
    const bool reduced = e_.spec().dp_cp() > 1 || r.group[ParallelDim::kEdp] >= 0;
    if (grads_open_[static_cast<std::size_t>(fu)] || !reduced) return;
    grads_open_[static_cast<std::size_t>(fu)] = 1;
    const Bytes bytes = grad_bytes(fu);
    if (bytes > 0)
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, bytes,
               "fsdp2 unsharded grads");
  }

  // After a unit's backward: under pp only at the last micro-batch (no resharding, no gradient
  // sync before it), else every micro-batch: reshard, reduce-scatter, HSDP all-reduce.
  void post_backward(SegmentPass& sp, int fu) {
    if (e_.spec().pp > 1 && !sp.last_micro) return;
    RankState& r = sp.st.r;
    release(r, fu);
    if (!grads_open_[static_cast<std::size_t>(fu)]) return;
    grads_open_[static_cast<std::size_t>(fu)] = 0;
    const Bytes bytes = grad_bytes(fu);
    if (bytes == 0) return;
    const Dtype dt = f_.reduce_bytes == 4 ? Dtype::kFp32 : b_.weights_dtype();
    OpId last = part_collectives(e_, r, parts(r, fu), "fsdp", CollectiveKind::kReduceScatter,
                                 "grads", f_.reduce_bytes, dt,
                                 {{r.last_compute, DepKind::kStreamWaits}}, StepPhase::kBackward);
    if (f_.replicate > 1) {
      const std::int64_t s = shard_ranks();
      const Bytes shard = (fu_params_[static_cast<std::size_t>(fu)] + s - 1) / s * f_.reduce_bytes;
      std::vector<Dep> deps;
      deps.push_back({last != kNoOp ? last : r.last_compute, DepKind::kStreamWaits});
      last = e_.coll(r, r.stream[ParallelDim::kDp],
                     op_names::collective("fsdp", CollectiveKind::kAllReduce, "grads"),
                     CollectiveKind::kAllReduce, rep_group_[static_cast<std::size_t>(r.rank)],
                     shard, std::move(deps), StepPhase::kBackward);
      b_.set_dtype(last, dt);
    }
    b_.release(r.thread, r.stream[ParallelDim::kDp], r.gpu, MemCategory::kCommBuffers, bytes,
               "fsdp2 unsharded grads");
    if (last != kNoOp) sp.st.optimizer_waits.push_back({last, DepKind::kStreamWaits});
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_fsdp2_piece(Emitter& e) {
  return std::make_unique<Fsdp2Piece>(e);
}

}  // namespace hybrid
}  // namespace csim::core
