// Data parallelism's part of the composable lowering (hybrid_emitter.hpp; docs/program.md, "ZeRO
// and FSDP", stage 0 and 1): one data-parallel group per (tp, pp) position, and the reduction of
// each unit's gradients over it at the last micro-batch (gradient accumulation: the others only
// accumulate) — while the rest of backward runs (overlap_grad_reduce, Megatron's default, as
// DDP's buckets), or all after the backward, in the same unit order. Stage 0 all-reduces; stage 1
// (Megatron's distributed optimizer) reduce-scatters, the sharding piece gathering the updated
// parameters after the optimizer. From stage 2 on the sharding piece reduces every micro-batch
// instead (zero_fsdp.cpp).
#include "core/lowering/framework_states.hpp"
#include "core/lowering/hybrid_emitter.hpp"

namespace csim::core::hybrid {
namespace {

class DataParallelPiece final : public ParallelPiece {
 public:
  bool layer_hooks() const override { return false; }  // no begin_layer / end_layer
  explicit DataParallelPiece(Emitter& e) : e_(e) {}

  void add_groups() override {
    // One group per (tp, pp) position over dp x cp: a CP run reduces its gradients over the
    // context-parallel ranks too, as Megatron's DDP does (data_parallel_group
    // with_context_parallel).
    e_.grid().for_each_group({ParallelDim::kDp, ParallelDim::kCp}, [&](const std::vector<int>& rks,
                                                                       const RankCoord& at) {
      const int g =
          rks.size() > 1
              ? e_.add_group(rks, e_.group_name("dp", at, {ParallelDim::kDp, ParallelDim::kCp}))
              : -1;
      for (int x : rks) e_.ranks()[static_cast<std::size_t>(x)].group[ParallelDim::kDp] = g;
    });
  }

  void begin_step(StepState& /*st*/) override { deferred_.clear(); }

  void end_unit(LayerPass& lp) override {
    if (lp.forward() || !lp.sp.last_micro || e_.plan().sharding.grads_reduce_scattered) return;
    // DeepSpeed reduces in the model dtype, Megatron in its main-grad dtype (framework_states.hpp).
    // Under expert parallelism the routed experts' gradients are reduced over the
    // expert-data-parallel group (Megatron's expert_data_parallel_group), the rest over dp x cp.
    const Unit& u = e_.plan().units[static_cast<std::size_t>(lp.unit)];
    const int g = framework_grad_bytes(e_.scenario());
    RankState& r = lp.r();
    for (const Part& part : {Part{(u.params - u.expert_params) * g, ParallelDim::kDp},
                             Part{u.expert_params * g, ParallelDim::kEdp}}) {
      if (r.group[part.over] < 0 || part.grads == 0) continue;
      if (e_.spec().overlap_grad_reduce) {
        lp.sp.st.optimizer_waits.push_back(
            {reduce(r, part, {{r.last_compute, DepKind::kStreamWaits}}), DepKind::kStreamWaits});
      } else {
        deferred_.push_back(part);
      }
    }
  }

  void end_backward(StepState& st) override {
    // Without overlap the reductions start after the whole backward, in the same unit order.
    RankState& r = st.r;
    for (const Part& part : deferred_) {
      st.optimizer_waits.push_back(
          {reduce(r, part, {{r.last_compute, DepKind::kStreamWaits}}), DepKind::kStreamWaits});
    }
  }

 private:
  // A unit's gradients reduced over one group: its dense ones over dp (x cp), its experts' over
  // edp.
  struct Part {
    Bytes grads = 0;
    ParallelDim over = ParallelDim::kDp;
  };
  Emitter& e_;
  std::vector<Part> deferred_;  // overlap_grad_reduce false: unit gradients reduced after backward

  OpId reduce(RankState& r, const Part& part, std::vector<Dep> deps) {
    const CollectiveKind k = e_.plan().sharding.optimizer_sharded ? CollectiveKind::kReduceScatter
                                                                  : CollectiveKind::kAllReduce;
    const OpId id =
        e_.coll(r, r.stream[ParallelDim::kDp],
                op_names::collective(part.over == ParallelDim::kEdp ? "edp" : "dp", k, "grads"), k,
                r.group[part.over], part.grads, std::move(deps), StepPhase::kBackward);
    e_.builder().set_dtype(id, deepspeed_states(e_.scenario()) ? e_.builder().weights_dtype()
                                                               : e_.builder().grads_dtype());
    return id;
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_data_parallel_piece(Emitter& e) {
  return std::make_unique<DataParallelPiece>(e);
}

}  // namespace csim::core::hybrid
