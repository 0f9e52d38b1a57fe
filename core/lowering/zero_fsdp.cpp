// ZeRO stages 1-3 and FSDP (docs/program.md, "ZeRO and FSDP"; Rajbhandari et al. 2020, "ZeRO:
// Memory Optimizations Toward Training Trillion Parameter Models"; Zhao et al. 2023, "PyTorch
// FSDP"). Stage 1 shards the optimizer state over the data-parallel ranks, stage 2 also the
// gradients (a reduce-scatter per unit replaces the all-reduce), stage 3 also the parameters (an
// all-gather per unit before its forward and again before its backward). FSDP full_shard is stage
// 3, shard_grad_op keeps the gathered parameters from forward to backward (stage 2 at rest).
//
// The pure pieces (model_state_bytes, sharding_plan) and the ShardingPiece, the lowering's
// sharding dimension (hybrid_emitter.hpp): per unit, the parameter all-gathers (one unit ahead
// with prefetch) into "gathered params" buffers, the gradient bucket and its reduce-scatter
// (stage >= 2), and after the optimizer the all-gather of the updated shard (stages 1, 2). Stage
// 0/1's all-reduce or reduce-scatter of whole gradients is the data-parallel piece's
// (dp_grad_reduction.cpp).
#include <algorithm>
#include <unordered_map>

#include "core/lowering/expert_sharding.hpp"
#include "core/lowering/framework_states.hpp"
#include "core/lowering/fsdp1_flat_param.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/fp8_recipe.hpp"

namespace csim::core {

int optimizer_bytes_per_param(const TrainingSpec& t) {
  // docs/scenario.md, "training.precision": fp32 master copy + Adam's two fp32 moments (8) or
  // SGD momentum (4).
  return precision_bytes(t.precision, t.amp_dtype).master + optimizer_moment_bytes_per_param(t);
}

ModelStateBytes model_state_bytes(std::int64_t params, const TrainingSpec& t, int zero_stage,
                                  int dp) {
  const PrecisionBytes pb = precision_bytes(t.precision, t.amp_dtype);
  const std::int64_t shard = (params + dp - 1) / dp;  // ceil(Psi / N)
  const Bytes k = optimizer_bytes_per_param(t);
  ModelStateBytes out;
  out.params = (zero_stage >= 3 ? shard : params) * pb.weights;
  out.grads = (zero_stage >= 2 ? shard : params) * pb.grads;
  out.optimizer = (zero_stage >= 1 ? shard : params) * k;
  return out;
}

ShardingPlan sharding_plan(const ParallelSpec& ps, StrategyKind kind) {
  ShardingPlan p;
  p.params_sharded = ps.zero_stage == 3 || kind == StrategyKind::kFsdp;
  p.reshard_after_forward = ps.zero_stage == 3;
  p.state_stage = p.params_sharded ? 3 : ps.zero_stage;
  p.optimizer_sharded = ps.zero_stage >= 1;
  p.grads_reduce_scattered = ps.zero_stage >= 2;
  p.shard_ranks = ps.dp_cp() / std::max(1, ps.fsdp2.replicate);
  return p;
}

namespace hybrid {
namespace {

class ShardingPiece final : public ParallelPiece {
 public:
  bool layer_hooks() const override { return false; }  // no begin_layer / end_layer
  explicit ShardingPiece(Emitter& e) : e_(e), b_(e.builder()), sh_(e.plan().sharding) {}

  // FSDP1's pre-unshard stream (_runtime_utils.py, _init_streams: "Stream for pre-unshard logic,
  // namely allocations and writes for CPU offloading (H2D copy) and mixed precision (low
  // precision cast)"), where _use_low_precision_shard allocates _mp_shard. Only under parameter
  // mixed precision, the one use the Program has for it.
  void add_streams(RankState& r) override {
    if (fsdp1_mp_shards())
      pre_unshard_[r.rank] = b_.add_stream(r.gpu, StreamRole::kCopy, "fsdp1 pre_unshard");
  }

  void begin_step(StepState& /*st*/) override {
    const std::size_t n = e_.plan().units.size();
    gathered_.assign(n, 0);
    gather_op_.assign(n, kNoOp);
    bucket_ = 0;
    free_events_.clear();
  }

  void begin_unit(LayerPass& lp) override {
    const ParallelSpec& ps = e_.spec();
    const auto& units = e_.plan().units;
    const Segment sg = lp.sp.sg;
    const int u = lp.unit;
    const bool next = u + 1 < static_cast<int>(units.size()) &&
                      units[static_cast<std::size_t>(u + 1)].first < sg.end;
    const bool prev = u > 0 && units[static_cast<std::size_t>(u - 1)].end > sg.first;
    if (lp.forward()) {
      if (!sh_.params_sharded) return;
      gather(lp.r(), u, StepPhase::kForward);
      // Prefetch: the next unit's gather goes out before this unit computes; not in an
      // evaluation forward. FSDP1 only with forward_prefetch (PyTorch's default: off; the
      // gather is issued when the host reaches the unit, docs/program.md, "ZeRO and FSDP").
      const bool ahead = fsdp1() ? ps.fsdp1.forward_prefetch : ps.prefetch;
      if (!lp.sp.eval && ahead && next) gather(lp.r(), u + 1, StepPhase::kForward);
      wait_for_gather(u, lp.deps);
      return;
    }
    if (sh_.params_sharded) {
      gather(lp.r(), u, StepPhase::kBackward);
      // FSDP1's BACKWARD_PRE (its default): the previous unit's gather right after this one's.
      const bool ahead =
          fsdp1() ? ps.fsdp1.backward_prefetch == BackwardPrefetch::kBackwardPre : ps.prefetch;
      if (ahead && prev) gather(lp.r(), u - 1, StepPhase::kBackward);
      wait_for_gather(u, lp.deps);
    }
    if (sh_.grads_reduce_scattered && ps.dp_cp() > 1) {
      // The unit's full gradients before the reduce-scatter into the shard.
      RankState& r = lp.r();
      bucket_ = units[static_cast<std::size_t>(u)].params * framework_grad_bytes(e_.scenario());
      if (bucket_ > 0)
        b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, bucket_, "grad bucket");
    }
  }

  void end_unit(LayerPass& lp) override {
    if (lp.forward()) {
      // ZeRO-3 / full_shard free the gathered parameters after the forward (shard_grad_op keeps
      // them for the backward); an evaluation forward frees them in any case.
      if (sh_.reshard_after_forward || lp.sp.eval) release_gathered(lp.r(), lp.unit);
      return;
    }
    RankState& r = lp.r();
    if (sh_.params_sharded) release_gathered(r, lp.unit);
    // FSDP1's BACKWARD_POST: the previous unit's gather after this unit's backward and reshard.
    if (sh_.params_sharded && fsdp1() &&
        e_.spec().fsdp1.backward_prefetch == BackwardPrefetch::kBackwardPost && lp.unit > 0 &&
        e_.plan().units[static_cast<std::size_t>(lp.unit - 1)].end > lp.sp.sg.first)
      gather(r, lp.unit - 1, StepPhase::kBackward);
    const std::int64_t numel = e_.plan().units[static_cast<std::size_t>(lp.unit)].params;
    const Bytes g = framework_grad_bytes(e_.scenario());  // DeepSpeed: the model dtype
    Bytes grads = numel * g;
    if (e_.spec().dp_cp() <= 1 || grads == 0 || !sh_.grads_reduce_scattered) return;
    // FSDP1's _reduce_grad (docs/memory.md, "FSDP1 flat parameters"): the padded copy of the
    // unsharded gradient when the unit does not divide evenly, and the reduce-scatter's output
    // shard, on the post-backward stream; the reduce-scatter carries the padded gradient.
    const Fsdp1FlatParam fp = fsdp1() ? fsdp1_flat_param(numel, sh_.shard_ranks) : Fsdp1FlatParam{};
    if (fsdp1()) grads = fp.padded * g;
    if (fp.pad_copy > 0)
      b_.alloc(r.thread, r.stream[ParallelDim::kDp], r.gpu, MemCategory::kCommBuffers,
               fp.pad_copy * g, "fsdp1 padded grad");
    if (fp.sharded_grad > 0)
      b_.alloc(r.thread, r.stream[ParallelDim::kDp], r.gpu, MemCategory::kCommBuffers,
               fp.sharded_grad * g, "fsdp1 sharded grad");
    // ZeRO-2/3, FSDP: reduce-scatter this unit's gradients every micro-batch into the shard.
    // Under expert parallelism (ZeRO-2) the routed experts' over edp (expert_sharding.hpp).
    const Dtype dt = deepspeed_states(e_.scenario()) ? b_.weights_dtype() : b_.grads_dtype();
    const Unit& un = e_.plan().units[static_cast<std::size_t>(lp.unit)];
    OpId rs = kNoOp;
    if (un.expert_params > 0) {
      rs =
          part_collectives(e_, r, unit_parts(r, numel, un.expert_params, r.group[ParallelDim::kDp]),
                           "zero", CollectiveKind::kReduceScatter, "grads", g, dt,
                           {{r.last_compute, DepKind::kStreamWaits}}, StepPhase::kBackward);
    } else {
      rs = e_.coll(r, r.stream[ParallelDim::kDp],
                   op_names::collective("zero", CollectiveKind::kReduceScatter, "grads"),
                   CollectiveKind::kReduceScatter, r.group[ParallelDim::kDp], grads,
                   {{r.last_compute, DepKind::kStreamWaits}}, StepPhase::kBackward);
      b_.set_dtype(rs, dt);
    }
    if (bucket_ > 0)
      b_.release(r.thread, r.stream[ParallelDim::kDp], r.gpu, MemCategory::kCommBuffers, bucket_,
                 "grad bucket");
    // Accumulated into _saved_grad_shard (the gradient shard of the model state), then dropped.
    if (fp.pad_copy > 0)
      b_.release(r.thread, r.stream[ParallelDim::kDp], r.gpu, MemCategory::kCommBuffers,
                 fp.pad_copy * g, "fsdp1 padded grad");
    if (fp.sharded_grad > 0)
      b_.release(r.thread, r.stream[ParallelDim::kDp], r.gpu, MemCategory::kCommBuffers,
                 fp.sharded_grad * g, "fsdp1 sharded grad");
    if (rs != kNoOp) lp.sp.st.optimizer_waits.push_back({rs, DepKind::kStreamWaits});
  }

  void end_optimizer(StepState& st, OpId& last) override {
    // ZeRO-1/2: every rank updated its shard; all-gather the parameters.
    // Under expert parallelism the routed experts' shards are gathered over the
    // expert-data-parallel group, the dense parameters over dp x cp.
    RankState& r = st.r;
    const int stage = e_.spec().zero_stage;
    if (sh_.params_sharded || (stage != 1 && stage != 2)) return;
    for (const auto& [params, over] : {std::pair{r.params - r.expert_params, ParallelDim::kDp},
                                       std::pair{r.expert_params, ParallelDim::kEdp}}) {
      if (r.group[over] < 0 || params <= 0) continue;
      last = e_.coll(r, r.stream[ParallelDim::kDp],
                     op_names::collective(over == ParallelDim::kEdp ? "zero edp" : "zero",
                                          CollectiveKind::kAllGather, "params"),
                     CollectiveKind::kAllGather, r.group[over], params * e_.precision().weights,
                     {{last, DepKind::kStreamWaits}}, StepPhase::kOptimizer);
      b_.set_dtype(last, b_.weights_dtype());
    }
  }

 private:
  Emitter& e_;
  ProgramBuilder& b_;
  const ShardingPlan& sh_;
  std::vector<char> gathered_;     // per unit: its parameters are gathered
  std::vector<OpId> gather_op_;    // per unit: the gather its kernels wait for
  Bytes bucket_ = 0;               // the open gradient bucket (stage >= 2)
  std::vector<OpId> free_events_;  // FSDP1 limit_all_gathers: resharded units' last kernels
  std::unordered_map<int, int> pre_unshard_;  // rank -> FSDP1's pre-unshard stream

  bool fsdp1() const {
    return b_.scenario().strategy.kind == StrategyKind::kFsdp && e_.spec().fsdp_version == 1;
  }

  // FSDP1 gathers units through an _mp_shard (mp_shard_bytes > 0 for a unit with parameters).
  bool fsdp1_mp_shards() const {
    const TrainingSpec& t = b_.scenario().training;
    return fsdp1() && sh_.params_sharded && sh_.shard_ranks > 1 && e_.precision().master > 0 &&
           !(t.precision == Precision::kFp8 && t.fp8.fp8_all_gather);
  }

  // A unit's gathered parameters as stored; with training.fp8.fp8_all_gather its FP8 layers'
  // weights are gathered quantised (docs/fp8.md, "FP8 all-gather"; fp8_all_gather_bytes).
  Bytes unit_bytes(int u) const {
    const Unit& un = e_.plan().units[static_cast<std::size_t>(u)];
    const Bytes w = e_.precision().weights;
    const TrainingSpec& t = b_.scenario().training;
    if (t.precision != Precision::kFp8 || !t.fp8.fp8_all_gather) {
      // FSDP1 gathers its padded flat parameter (docs/memory.md, "FSDP1 flat parameters").
      if (fsdp1()) return fsdp1_flat_param(un.params, sh_.shard_ranks).padded * w;
      return un.params * w;
    }
    std::int64_t fp8 = 0;
    for (int i = un.first; i < un.end; ++i) {
      if (runs_in_fp8(b_.scenario().model.layers[static_cast<std::size_t>(i)], t))
        fp8 += e_.plan().sharded[static_cast<std::size_t>(i)].params;
    }
    return fp8_all_gather_bytes(fp8, t.fp8, static_cast<int>(w)) + (un.params - fp8) * w;
  }

  // FSDP1's _mp_shard of unit u: W x shard when the recipe keeps an fp32 master and the unit is
  // gathered unquantised, else 0.
  Bytes mp_shard_bytes(int u) const {
    if (!fsdp1_mp_shards()) return 0;
    const Unit& un = e_.plan().units[static_cast<std::size_t>(u)];
    return fsdp1_flat_param(un.params, sh_.shard_ranks, e_.precision().master > 0).mp_shard *
           e_.precision().weights;
  }

  void gather(RankState& r, int u, StepPhase phase) {
    if (gathered_[static_cast<std::size_t>(u)]) return;
    const Bytes bytes = unit_bytes(u);
    gathered_[static_cast<std::size_t>(u)] = 1;
    if (bytes == 0) return;
    b_.alloc(r.thread, r.stream[ParallelDim::kDp], r.gpu, MemCategory::kCommBuffers, bytes,
             "gathered params");
    // FSDP1 parameter mixed precision: the low-precision copy of the local shard, _mp_shard, is
    // what the all-gather sends; freed once it is issued (docs/memory.md, "FSDP1 flat
    // parameters"). _unshard (_runtime_utils.py) runs pre_unshard -> _use_low_precision_shard
    // under `with stream(pre_unshard_stream)`, so the block is allocated there, then
    // unshard_stream.wait_stream(pre_unshard_stream): the all-gather waits for it.
    const Bytes mp = mp_shard_bytes(u);
    std::vector<Dep> deps;
    if (mp > 0) {
      const OpId a = b_.alloc(r.thread, pre_unshard_.at(r.rank), r.gpu, MemCategory::kCommBuffers,
                              mp, "fsdp1 mp shard");
      deps.push_back({a, DepKind::kStreamWaits});
    }
    // Without prefetch the gather starts only once the previous kernel is done (no overlap).
    if (!e_.spec().prefetch && r.last_compute != kNoOp)
      deps.push_back({r.last_compute, DepKind::kStreamWaits});
    // FSDP1's rate limiter (_runtime_utils.py, _unshard; _limiter_utils.py, _FreeEventQueue
    // with _max_num_inflight_all_gathers = 2): with 2 free events queued the host synchronizes
    // on the oldest (the end of that unit's last kernel) before issuing the gather.
    if (fsdp1() && e_.spec().fsdp1.limit_all_gathers && free_events_.size() >= 2) {
      deps.push_back({free_events_.front(), DepKind::kHostWaits});
      free_events_.erase(free_events_.begin());
    }
    const OpId g = e_.coll(r, r.stream[ParallelDim::kDp],
                           op_names::collective("zero", CollectiveKind::kAllGather, "params"),
                           CollectiveKind::kAllGather, r.group[ParallelDim::kDp], bytes,
                           std::move(deps), phase);
    b_.set_dtype(g, b_.weights_dtype());
    if (mp > 0) {
      // FSDP1's post_unshard -> _free_low_precision_sharded_param (_flat_param.py), run under
      // `with stream(unshard_stream)` (_runtime_utils.py, _unshard):
      // _no_dispatch_record_stream(_mp_shard, current_stream()), then _free_storage. The current
      // stream is the unshard stream, the all-gather's (r.stream[ParallelDim::kDp]), not the
      // allocation's: the block is reusable once the all-gather has run (docs/memory.md,
      // "Allocation backpressure").
      const OpId f = b_.release(r.thread, r.stream[ParallelDim::kDp], r.gpu,
                                MemCategory::kCommBuffers, mp, "fsdp1 mp shard");
      b_.program().ops[static_cast<std::size_t>(f)].record_stream = true;
    }
    gather_op_[static_cast<std::size_t>(u)] = g;
  }

  void release_gathered(RankState& r, int u) {
    if (!sh_.params_sharded || !gathered_[static_cast<std::size_t>(u)]) return;
    gathered_[static_cast<std::size_t>(u)] = 0;
    const Bytes bytes = unit_bytes(u);
    if (bytes > 0) {
      const OpId f = b_.release(r.thread, r.compute, r.gpu, MemCategory::kCommBuffers, bytes,
                                "gathered params");
      // FSDP1's _free_unsharded_flat_param (_flat_param.py): _no_dispatch_record_stream on the
      // compute stream, then _free_storage (docs/memory.md, "Allocation backpressure").
      if (fsdp1()) b_.program().ops[static_cast<std::size_t>(f)].record_stream = true;
    }
    gather_op_[static_cast<std::size_t>(u)] = kNoOp;
    // _reshard records a free event on the compute stream (after the unit's kernels).
    if (fsdp1() && e_.spec().fsdp1.limit_all_gathers && r.last_compute != kNoOp)
      free_events_.push_back(r.last_compute);
  }

  void wait_for_gather(int u, std::vector<Dep>& deps) const {
    const OpId g = gather_op_[static_cast<std::size_t>(u)];
    if (g != kNoOp) deps.push_back({g, DepKind::kStreamWaits});
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_sharding_piece(Emitter& e) {
  return std::make_unique<ShardingPiece>(e);
}

}  // namespace hybrid

Program lower_zero(const Scenario& s, Progress* progress) {
  const ParallelSpec& ps = s.strategy.parallel;
  return lower_hybrid(
      s, "zero stage " + std::to_string(ps.zero_stage) + " (dp " + std::to_string(ps.dp) + ")",
      progress);
}

Program lower_fsdp(const Scenario& s, Progress* progress) {
  const ParallelSpec& ps = s.strategy.parallel;
  if (ps.fsdp2.enabled) {
    // FSDP2 (fsdp2.cpp): "fsdp2 (dp 8)", "fsdp2 (dp 4 x tp 2, reshard never)", ...
    std::string label = "fsdp2 (dp " + std::to_string(ps.dp);
    if (ps.fsdp2.replicate > 1)
      // The shard groups span dp x cp (torchtitan's dp_shard_cp): shard = dp cp / replicate.
      label += " = replicate " + std::to_string(ps.fsdp2.replicate) + " x shard " +
               std::to_string(ps.dp_cp() / ps.fsdp2.replicate);
    if (ps.tp > 1) label += " x tp " + std::to_string(ps.tp);
    if (ps.pp > 1) label += " x pp " + std::to_string(ps.pp);
    if (ps.fsdp2.reshard != ReshardPolicy::kDefault)
      label += std::string(", reshard ") + to_string(ps.fsdp2.reshard);
    if (ps.recompute != RecomputeMode::kNone) label += ", recompute " + recompute_label(ps);
    return lower_hybrid(s, label + ")", progress);
  }
  return lower_hybrid(
      s, std::string("fsdp ") + to_string(ps.fsdp) + " (dp " + std::to_string(ps.dp) + ")",
      progress);
}

}  // namespace csim::core
