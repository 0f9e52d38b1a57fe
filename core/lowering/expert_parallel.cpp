// Expert parallelism's part of the composable lowering (hybrid_emitter.hpp; docs/program.md,
// "Expert parallel"). Each MoE block's routed experts are split over the ep ranks of the expert
// layers' grid (RankGrid::expert: Megatron-Core's MoE Parallel Folding, etp x ep x edp x pp over
// the dense layers' ranks). Megatron's alltoall token dispatcher (MoEAlltoAllTokenDispatcher):
// each rank permutes its tokens' k copies into expert order, an all-to-all over the EP group sends
// every copy to the rank holding its expert (dispatch), the local experts run as grouped GEMMs, a
// second all-to-all brings the outputs home (combine) before the weighted un-permutation. In
// backward the two run reversed: the combine's gradient before experts.proj's backward, the
// dispatch's after experts.fc's. Both run in line on the compute stream (the dispatcher calls
// all_to_all on the current stream and the expert GEMMs consume its output). Under balanced
// routing every expert gets s k / E token copies per sample, so each rank's E / ep local experts
// get (s k / E) ep copies each from the whole group: the rank's expert FLOPs are those of its own
// s k copies, and each all-to-all moves e s k h bytes per sample and rank, (ep - 1) / ep of it
// over the links.
//
// Routing imbalance (moe.routing; core/model/moe_routing.hpp): per MoE block and micro-batch the
// experts' shares, and so each EP rank's load L_j = ep x its experts' shares (1 when balanced).
// Rank j's expert kernels do L_j times the balanced work (FLOPs, activation traffic, the grouped
// GEMM's tokens per expert); every all-to-all of the group moves max_j L_j times the balanced
// bytes (rank j receives L_j times its own copies in the dispatch and sends them back in the
// combine: the busiest rank bounds the exchange), and the combine waits for the slowest rank's
// experts. Every EP group of the run sees the same sample (the expert-data-parallel replicas
// stay mirror images, docs/program.md "Rank symmetry").
//
// The other dispatchers (strategy.moe_dispatcher; docs/program.md, "MoE token dispatchers"):
// allgather (Megatron's MoEAllGatherTokenDispatcher) all-gathers the group's tokens, e s h bytes
// per sample and rank, before the experts and reduce-scatters their outputs after (backward: the
// reduce-scatter's gradient is an all-gather, the all-gather's a reduce-scatter); every rank
// receives every token whatever the routing, so its volume does not follow the loads. deepep
// runs the all-to-alls over the traffic matrix of DeepEP's kernels (core/lowering/
// deepep_pattern.hpp), set on each EP group with the SMs those kernels hold.
//
// strategy.etp > 1 (expert_tensor_parallel.cpp; docs/program.md, "Expert tensor parallel"): the
// piece also makes the etp groups and issues an all-gather over them after each gathering
// exchange and a reduce-scatter before the other; with ep 1 (etp = tp) only those.
//
// strategy.moe_a2a_overlap 1f1b (moe_a2a_overlap.cpp): a paired pass's all-to-alls go on the
// rank's "ep a2a" comm stream, each after its pass's last op, and the kernel of that pass that
// needs it waits for it; the exchange before a paused pass's next layer is issued when it pauses.
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "core/error.hpp"
#include "core/lowering/deepep_pattern.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/model/fp8_moe.hpp"
#include "core/model/moe_routing.hpp"

namespace csim::core {

void shard_experts(ShardedLayer& sl, const LayerSpec& l, const ParallelSpec& ps) {
  if (l.expert_role == ExpertRole::kNone) return;
  if (ps.ep > 1) {
    // E / ep whole experts per rank (the parser makes ep divide E); FLOPs, traffic and saved
    // bytes per sample unchanged under balanced routing (above).
    sl.params /= ps.ep;
    sl.second_tensor_params /= ps.ep;
  }
  // Each expert split over the etp ranks (expert_tensor_parallel.cpp).
  shard_expert_tensor(sl, l, ps.etp);
}

namespace hybrid {
namespace {

class ExpertParallelPiece final : public ParallelPiece {
 public:
  explicit ExpertParallelPiece(Emitter& e) : e_(e) {}

  void add_streams(RankState& r) override {
    if (e_.spec().moe_a2a_overlap != MoeA2aOverlap::kNone)
      r.stream[ParallelDim::kEp] = e_.builder().add_stream(r.gpu, StreamRole::kComm, "ep a2a");
  }

  void add_groups() override {
    // The plan exists from here on (Emitter::build: plan, ranks, then groups).
    // Per sample on this rank, the bytes each all-to-all moves: the routed token copies
    // experts.proj writes, e (s / cp) k h (shard_context keeps 1/cp).
    const auto& layers = e_.scenario().model.layers;
    token_bytes_.assign(layers.size(), 0.0);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (layers[i].expert_role != ExpertRole::kFirst) continue;
      std::size_t j = i;
      while (j < layers.size() && layers[j].expert_role != ExpertRole::kLast) ++j;
      CSIM_ASSERT(j < layers.size());
      token_bytes_[i] = token_bytes_[j] = e_.plan().sharded[j].output_bytes_per_sample;
    }
    const RankGrid grid = RankGrid::expert(e_.spec());
    for (int rk = 0; rk < grid.size(); ++rk) ep_index_.push_back(grid.coord(rk)[ParallelDim::kEp]);
    balanced_ = uniform_expert_load(e_.scenario().model.transformer_config.moe);
    auto& ranks = e_.ranks();
    const ParallelSpec& ps = e_.spec();
    dispatcher_ = ps.moe_dispatcher;
    top_k_ = e_.scenario().model.transformer_config.moe.top_k;
    fp8_dispatch_ =
        dispatcher_ == MoeDispatcher::kDeepEp && fp8_moe_dispatch(e_.scenario().training);
    // The expert-tensor-parallel groups (etp > 1, expert_tensor_parallel.cpp): the all-gather
    // after the dispatch and the reduce-scatter before the combine.
    if (ps.etp > 1)
      grid.for_each_group(
          {ParallelDim::kEtp}, [&](const std::vector<int>& rks, const RankCoord& at) {
            const int g = e_.add_group(rks, name("etp", grid, at, ParallelDim::kEtp));
            for (int x : rks) ranks[static_cast<std::size_t>(x)].group[ParallelDim::kEtp] = g;
          });
    // With ep 1 (etp = tp, the parser's rule) the expert grid is the dense one: no all-to-all,
    // and the experts' gradients go with the dense ones over dp x cp (= edp).
    if (ps.ep <= 1) return;
    grid.for_each_group({ParallelDim::kEp}, [&](const std::vector<int>& rks, const RankCoord& at) {
      const int g = e_.add_group(rks, name("ep", grid, at, ParallelDim::kEp));
      for (int x : rks) ranks[static_cast<std::size_t>(x)].group[ParallelDim::kEp] = g;
      if (dispatcher_ == MoeDispatcher::kDeepEp) {
        CommGroup& cg = e_.builder().program().groups[static_cast<std::size_t>(g)];
        cg.a2a_shares = deepep_a2a_shares(cg.gpus, e_.scenario().cluster.gpus_per_node,
                                          e_.scenario().model.transformer_config.moe);
        cg.comm_sms = ps.deepep_sms;
      }
    });
    // The expert-data-parallel groups, over which the experts' gradients are reduced (the
    // data-parallel piece, dp_grad_reduction.cpp) and their optimizer state sharded.
    grid.for_each_group({ParallelDim::kEdp}, [&](const std::vector<int>& rks, const RankCoord& at) {
      const int g =
          rks.size() > 1 ? e_.add_group(rks, name("edp", grid, at, ParallelDim::kEdp)) : -1;
      for (int x : rks) ranks[static_cast<std::size_t>(x)].group[ParallelDim::kEdp] = g;
    });
  }

  void begin_layer(LayerPass& lp) override {
    const ExpertRole role = role_of(lp.layer);
    // A paired pass's exchange issued on the comm stream (at a pause, or after the layer before)
    // which this kernel needs.
    if (const auto it = waiting_.find(key(lp.sp, lp.phase)); it != waiting_.end()) {
      const Waiting w = it->second;
      lp.deps.push_back({w.op, DepKind::kStreamWaits});
      waiting_.erase(it);
      if (w.gather && gathers(lp.phase, role)) return;  // this layer's exchange, issued
    }
    if (gathers(lp.phase, role)) {
      std::vector<Dep> after;
      if (lp.r().last_compute != kNoOp)
        after.push_back({lp.r().last_compute, DepKind::kStreamWaits});
      lp.deps.push_back(
          {exchange(lp, lp.forward() ? "dispatch" : "combine grad", true, std::move(after)),
           DepKind::kStreamWaits});
    }
  }

  void end_layer(LayerPass& lp) override {
    const ExpertRole role = role_of(lp.layer);
    if (role != ExpertRole::kNone && !balanced_ && e_.spec().ep > 1) imbalance(lp);
    if ((lp.forward() && role == ExpertRole::kLast) ||
        (!lp.forward() && role == ExpertRole::kFirst)) {
      std::vector<Dep> after;
      const bool side = on_side(lp.sp, lp.phase);
      if (side) after.push_back({lp.r().last_compute, DepKind::kStreamWaits});
      lp.r().last_compute =
          exchange(lp, lp.forward() ? "combine" : "dispatch grad", false, std::move(after));
      // On the comm stream the pass's next kernel waits for it (in line the stream orders it).
      if (side) waiting_[key(lp.sp, lp.phase)] = {lp.r().last_compute, false};
    }
  }

  // A paired pass pauses before `next`: the dispatch (forward) or the combine's gradient
  // (backward) that layer begins with is issued now, after the pass's last op, so that it runs
  // under the other pass's next chunk (moe_a2a_overlap.cpp).
  void pause_pass(SegmentPass& sp, int next) override {
    const StepPhase phase = sp.forward ? StepPhase::kForward : StepPhase::kBackward;
    if (!on_side(sp, phase) || !gathers(phase, role_of(next))) return;
    RankState& r = sp.st.r;
    std::vector<Dep> after;
    if (r.last_compute != kNoOp) after.push_back({r.last_compute, DepKind::kStreamWaits});
    LayerPass lp{sp, next, e_.plan().unit_of_layer[static_cast<std::size_t>(next)], phase};
    waiting_[key(sp, phase)] = {
        exchange(lp, sp.forward ? "dispatch" : "combine grad", true, std::move(after)), true};
  }

  void end_segment(SegmentPass& sp) override {
    // An exchange no later kernel of the pass waits for (its segment ends with the combine):
    // the pipeline's send and the next pass wait for it as the rank's last op.
    waiting_.erase(key(sp, StepPhase::kForward));
    waiting_.erase(key(sp, StepPhase::kBackward));
  }

 private:
  // One MoE block's sample in one micro-batch: the EP ranks' loads and their maximum.
  struct Loads {
    std::vector<double> per_rank;
    double max = 1;
  };
  Emitter& e_;
  bool fp8_dispatch_ = false;        // the gathering exchanges in FP8 (core/model/fp8_moe.hpp)
  std::vector<double> token_bytes_;  // per layer: e (s / cp) k h at the block's expert layers
  std::vector<int> ep_index_;        // per rank: its index in its EP group
  bool balanced_ = true;
  MoeDispatcher dispatcher_ = MoeDispatcher::kAllToAll;
  int top_k_ = 1;
  std::unordered_map<std::int64_t, Loads> loads_;  // by block x micro-batches + micro
  // Under moe_a2a_overlap: by (pass, phase), the exchange on the comm stream the pass's next
  // kernel waits for (`gather`: the exchange its next layer begins with, issued at a pause).
  struct Waiting {
    OpId op = kNoOp;
    bool gather = false;
  };
  std::map<std::pair<const SegmentPass*, int>, Waiting> waiting_;
  // The load buffers held from an expert layer's forward to its backward, by (rank, layer x
  // micro-batches + micro).
  std::map<std::pair<int, std::int64_t>, Bytes> extra_;

  const Loads& loads(int layer, int micro) {
    const int block = e_.scenario().model.layers[static_cast<std::size_t>(layer)].block;
    const std::int64_t key = static_cast<std::int64_t>(block) * e_.spec().micro_batches + micro;
    auto it = loads_.find(key);
    if (it != loads_.end()) return it->second;
    Loads l;
    const MoeConfig& moe = e_.scenario().model.transformer_config.moe;
    // The loads as computed: the capacity caps (or pads) each expert's share first.
    l.per_rank = ep_rank_loads(kept_shares(moe, expert_shares(moe, block, micro)), e_.spec().ep);
    l.max = *std::max_element(l.per_rank.begin(), l.per_rank.end());
    return loads_.emplace(key, std::move(l)).first->second;
  }

  // The expert kernel just emitted at this rank's load: FLOPs, the activation part of its traffic
  // (the weights' is fixed) and the grouped GEMM's tokens per expert.
  void imbalance(LayerPass& lp) {
    const double f =
        loads(lp.layer, lp.sp.micro).per_rank[static_cast<std::size_t>(ep_index_[lp.r().rank])];
    Op& op = e_.builder().program().ops[static_cast<std::size_t>(lp.kernel)];
    const PrecisionBytes& pb = e_.precision();
    const Bytes weights = e_.plan().sharded[static_cast<std::size_t>(lp.layer)].params *
                          (pb.weights + (lp.forward() ? 0 : pb.grads));
    op.flops *= f;
    op.bytes =
        weights + static_cast<Bytes>(std::llround(static_cast<double>(op.bytes - weights) * f));
    if (op.gemm.m > 0)
      op.gemm.m = std::max<std::int64_t>(1, std::llround(static_cast<double>(op.gemm.m) * f));
    load_buffer(lp, f);
  }

  // What an expert layer saves for backward holds L_j times the balanced tokens too (the copies
  // the dispatch delivered, which experts.fc keeps; swiglu's and proj's inputs), so a rank above
  // its balanced share holds (L_j - 1) times the layer's saved bytes more from its forward to its
  // backward (docs/memory.md, "Expert parallel"). The segment's activations (pipeline.cpp) hold
  // the balanced share; ranks below it are charged that share (an overestimate the busiest rank's
  // peak does not see). Under full or per-op recompute the expert layers' activations are
  // recreated, not kept: nothing is added.
  void load_buffer(LayerPass& lp, double f) {
    const std::int64_t key =
        static_cast<std::int64_t>(lp.layer) * e_.spec().micro_batches + lp.sp.micro;
    RankState& r = lp.r();
    const std::string& layer = e_.scenario().model.layers[static_cast<std::size_t>(lp.layer)].name;
    if (lp.phase == StepPhase::kForward && !lp.sp.eval && f > 1) {
      const ShardedLayer& sl = e_.plan().sharded[static_cast<std::size_t>(lp.layer)];
      const RecomputeMode rc = e_.spec().recompute;
      const double saved = rc == RecomputeMode::kNone        ? sl.act_bytes_per_sample
                           : rc == RecomputeMode::kSelective ? sl.selective_act_bytes_per_sample
                                                             : 0.0;
      const auto extra = static_cast<Bytes>(
          std::llround(static_cast<double>(e_.per_micro_batch(saved)) * (f - 1)));
      if (extra <= 0) return;
      extra_[{r.rank, key}] = extra;
      e_.builder().alloc(r.thread, r.compute, r.gpu, MemCategory::kActivations, extra,
                         NameRef::cat({lp.sp.prefix, layer, ".load"}, lp.sp.micro));
    } else if (lp.phase == StepPhase::kBackward) {
      const auto it = extra_.find({r.rank, key});
      if (it == extra_.end()) return;
      e_.builder().release(r.thread, r.compute, r.gpu, MemCategory::kActivations, it->second,
                           NameRef::cat({lp.sp.prefix, layer, ".load"}, lp.sp.micro));
      extra_.erase(it);
    }
  }

  static std::pair<const SegmentPass*, int> key(const SegmentPass& sp, StepPhase phase) {
    return {&sp, static_cast<int>(phase)};
  }
  // The exchange before the experts: the dispatch forward (a recompute re-run included, as
  // LayerVisit::forward() counts it), the combine's gradient backward.
  static bool gathers(StepPhase phase, ExpertRole role) {
    const bool forward = phase != StepPhase::kBackward;
    return (forward && role == ExpertRole::kFirst) || (!forward && role == ExpertRole::kLast);
  }
  // Whether the exchange goes on the comm stream: a paired pass's forward or backward (a
  // recompute re-run inside it keeps its exchanges in line).
  bool on_side(const SegmentPass& sp, StepPhase phase) const {
    return sp.paired && e_.spec().moe_a2a_overlap != MoeA2aOverlap::kNone &&
           (phase == StepPhase::kForward || phase == StepPhase::kBackward);
  }

  ExpertRole role_of(int layer) const {
    return e_.scenario().model.layers[static_cast<std::size_t>(layer)].expert_role;
  }

  // The exchange before the experts (`gather`: the dispatch, or the combine's gradient) or after
  // them, as the dispatcher runs it (above). Under expert tensor parallelism the all-gather over
  // the etp group follows the gathering exchange and the reduce-scatter precedes the other, on the
  // same stream (MoEAlltoAllTokenDispatcher.dispatch_postprocess / combine_preprocess;
  // expert_tensor_parallel.cpp); returned: the exchange's last op.
  OpId exchange(LayerPass& lp, const char* what, bool gather, std::vector<Dep> deps) {
    if (e_.spec().etp <= 1) return ep_exchange(lp, what, gather, std::move(deps));
    RankState& r = lp.r();
    const int stream = on_side(lp.sp, lp.phase) ? r.stream[ParallelDim::kEp] : r.compute;
    if (gather) {
      if (e_.spec().ep > 1)
        deps = {{ep_exchange(lp, what, true, std::move(deps)), DepKind::kStreamWaits}};
      return etp_collective(lp, stream, what, true, std::move(deps));
    }
    const OpId rs = etp_collective(lp, stream, what, false, std::move(deps));
    if (e_.spec().ep <= 1) return rs;
    return ep_exchange(lp, what, false, {{rs, DepKind::kStreamWaits}});
  }

  // The expert-TP all-gather (`gather`) or reduce-scatter: the group's etp x c bytes, c the
  // rank's copies after the dispatch (its load L_j times its own under uneven routing; the
  // group's members share their EP index, so their load), the all-gather's output and the
  // reduce-scatter's input (nccl-tests' size).
  OpId etp_collective(LayerPass& lp, int stream, const char* what, bool gather,
                      std::vector<Dep> deps) {
    RankState& r = lp.r();
    const double load =
        balanced_ || e_.spec().ep <= 1
            ? 1.0
            : loads(lp.layer, lp.sp.micro).per_rank[static_cast<std::size_t>(ep_index_[r.rank])];
    const double bytes = token_bytes_[static_cast<std::size_t>(lp.layer)] * e_.spec().etp * load;
    return e_.coll(
        r, stream, NameRef::cat({gather ? "etp all_gather " : "etp reduce_scatter ", what}),
        gather ? CollectiveKind::kAllGather : CollectiveKind::kReduceScatter,
        r.group[ParallelDim::kEtp], e_.per_micro_batch(bytes), std::move(deps), lp.phase);
  }

  OpId ep_exchange(LayerPass& lp, const char* what, bool gather, std::vector<Dep> deps) {
    RankState& r = lp.r();
    const int stream = on_side(lp.sp, lp.phase) ? r.stream[ParallelDim::kEp] : r.compute;
    const double copies = token_bytes_[static_cast<std::size_t>(lp.layer)];
    if (dispatcher_ == MoeDispatcher::kAllGather) {
      // The group's tokens: ep x e (s / cp) h, the all-gather's output and the reduce-scatter's
      // input (nccl-tests' size).
      const double bytes = copies / top_k_ * e_.spec().ep;
      return e_.coll(
          r, stream, NameRef::cat({gather ? "ep all_gather " : "ep reduce_scatter ", what}),
          gather ? CollectiveKind::kAllGather : CollectiveKind::kReduceScatter,
          r.group[ParallelDim::kEp], e_.per_micro_batch(bytes), std::move(deps), lp.phase);
    }
    double bytes = copies * (balanced_ ? 1.0 : loads(lp.layer, lp.sp.micro).max);
    // DeepSeek-V3's FP8 dispatch (training.fp8.moe_dispatch, deepep only): the dispatch forward
    // and the combine's gradient backward move e4m3 tokens with 1x128 FP32 scales, the combine
    // and the dispatch's gradient stay bf16 (docs/fp8.md, "MoE in FP8").
    if (gather && fp8_dispatch_) bytes *= fp8_moe_quantised_factor(e_.scenario().training.fp8);
    const char* label = dispatcher_ == MoeDispatcher::kDeepEp ? "ep deepep " : "ep all_to_all ";
    return e_.coll(r, stream, NameRef::cat({label, what}), CollectiveKind::kAllToAll,
                   r.group[ParallelDim::kEp], e_.per_micro_batch(bytes), std::move(deps), lp.phase);
  }

  // "ep (edp 0, pp 1)": the group's position on the expert grid's other dimensions.
  static std::string name(const char* label, const RankGrid& grid, const RankCoord& at,
                          ParallelDim along) {
    std::string out = std::string(label) + " (";
    bool first = true;
    for (ParallelDim d :
         {ParallelDim::kEtp, ParallelDim::kEp, ParallelDim::kEdp, ParallelDim::kPp}) {
      if (d == along || (grid.size(d) <= 1 && d != ParallelDim::kPp)) continue;
      out += (first ? "" : ", ") + std::string(to_string(d)) + " " + std::to_string(at[d]);
      first = false;
    }
    return out + ")";
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_expert_parallel_piece(Emitter& e) {
  return std::make_unique<ExpertParallelPiece>(e);
}

}  // namespace hybrid
}  // namespace csim::core
