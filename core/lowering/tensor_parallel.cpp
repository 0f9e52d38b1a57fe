// Tensor parallel (docs/program.md, "Tensor parallel"): Megatron's column/row-parallel GEMMs
// (Shoeybi et al. 2019, section 3). Per transformer block, forward: the row-parallel attention and
// MLP output projections end in an all-reduce of b*s*h elements ("g"); backward: the
// column-parallel QKV and MLP input GEMMs end in an all-reduce of their input gradient ("f").
// So 2 all-reduces forward and 2 backward, each of b*s*h*e bytes. With sequence parallelism
// (Korthikanti et al. 2022, section 4.2.2) each all-reduce becomes a reduce-scatter after the row
// GEMM and an all-gather before the column GEMM, forward and backward, and the replicated layers
// (layer norms, residual adds, dropout) run on s/t positions per rank.
//
// shard_layer says what each layer does on one rank; the TensorParallelPiece (hybrid_emitter.hpp)
// makes one TP group per (dp, pp) position and issues the layer's collectives around its kernel,
// in line on the compute stream (the next kernel needs their result; Megatron runs them on the
// default stream).
#include <array>
#include <unordered_map>

#include "core/error.hpp"
#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/lowering/tp_comm_overlap.hpp"

namespace csim::core {

ShardedLayer shard_layer(const ModelSpec& m, int index, int tp, bool sp) {
  const LayerSpec& l = m.layers[static_cast<std::size_t>(index)];
  ShardedLayer out;
  out.params = l.params;
  out.second_tensor_params = l.second_tensor_params;
  out.flops_per_sample = l.fwd_flops_per_sample;
  out.traffic_per_sample = l.fwd_bytes_per_sample;
  out.bwd_flops_per_sample = l.bwd_flops_per_sample;
  out.bwd_traffic_per_sample = l.bwd_bytes_per_sample;
  out.act_bytes_per_sample = l.activation_bytes_per_sample;
  out.selective_act_bytes_per_sample = l.selective_activation_bytes_per_sample >= 0
                                           ? l.selective_activation_bytes_per_sample
                                           : l.activation_bytes_per_sample;
  out.output_bytes_per_sample = l.output_bytes_per_sample;
  if (tp <= 1) return out;
  const double t = tp;
  if (l.expert_role != ExpertRole::kNone) {
    // The routed experts under tp > 1 with etp 1 (docs/program.md, "Expert parallel"): whole
    // experts, each tp rank's own s / t tokens (sequence parallelism, which the parser requires):
    // the work, the saved activations and the output split by t, the weights not, and no tensor-
    // parallel collective (the expert-parallel all-to-alls move the tokens).
    out.split_tokens(t);
    return out;
  }
  // The activation a TP collective moves: the row layer's output, or the column layer's input
  // (the previous layer's output), both s * h * e per sample.
  const double prev_out =
      index > 0 ? m.layers[static_cast<std::size_t>(index - 1)].output_bytes_per_sample : 0.0;
  const bool row_like = l.tp_role == TpRole::kRow || l.tp_role == TpRole::kVocabInput;
  const bool col_like = l.tp_role == TpRole::kColumn || l.tp_role == TpRole::kVocabOutput;
  const bool split_work = l.tp_role != TpRole::kReplicated || sp;
  if (split_work) {
    out.flops_per_sample /= t;
    out.traffic_per_sample /= t;
    if (out.bwd_flops_per_sample > 0) out.bwd_flops_per_sample /= t;
    if (out.bwd_traffic_per_sample > 0) out.bwd_traffic_per_sample /= t;
  }
  if (l.tp_role != TpRole::kReplicated) {
    out.params = (l.params + tp - 1) / tp;
    out.second_tensor_params = (l.second_tensor_params + tp - 1) / tp;
  }
  // Saved activations (Korthikanti et al. 2022, section 4.2.1): a column GEMM saves its
  // replicated input, a row GEMM and the sharded pointwise layers their 1/t share; with sequence
  // parallelism everything is 1/t.
  const bool act_split = sp || l.tp_role == TpRole::kRow || l.tp_role == TpRole::kSharded;
  if (act_split) {
    out.act_bytes_per_sample /= t;
    out.selective_act_bytes_per_sample /= t;
  }
  if (l.tp_role != TpRole::kReplicated && l.tp_role != TpRole::kRow &&
      l.tp_role != TpRole::kVocabInput) {
    out.output_bytes_per_sample /= t;  // column / sharded / vocab outputs stay split
  } else if (sp) {
    out.output_bytes_per_sample /= t;  // sequence-sharded after the reduce-scatter
  }
  if (row_like) {
    out.comm_bytes_per_sample = l.output_bytes_per_sample;
    out.fwd_after = sp ? TpComm::kReduceScatter : TpComm::kAllReduce;
    if (sp) out.bwd_before = TpComm::kAllGather;
  }
  if (col_like) {
    out.comm_bytes_per_sample = prev_out;
    out.bwd_after = sp ? TpComm::kReduceScatter : TpComm::kAllReduce;
    if (sp) out.fwd_before = TpComm::kAllGather;
  }
  return out;
}

namespace hybrid {
namespace {

class TensorParallelPiece final : public ParallelPiece {
 public:
  explicit TensorParallelPiece(Emitter& e) : e_(e) {}

  void add_groups() override {
    e_.grid().for_each_group(
        {ParallelDim::kTp}, [&](const std::vector<int>& rks, const RankCoord& at) {
          const int g =
              rks.size() > 1 ? e_.add_group(rks, e_.group_name("tp", at, {ParallelDim::kTp})) : -1;
          for (int x : rks) e_.ranks()[static_cast<std::size_t>(x)].group[ParallelDim::kTp] = g;
        });
  }

  void add_streams(RankState& r) override {
    const ParallelSpec& ps = e_.spec();
    if (ps.tp > 1 && ps.tp_comm_overlap && !ps.sequence_parallel)
      tp_stream_[r.rank] = e_.builder().add_stream(r.gpu, StreamRole::kComm, "tp");
  }

  void begin_layer(LayerPass& lp) override {
    const ShardedLayer& sl = layer(lp);
    // An overlapped input-gradient all-reduce (tp_comm_overlap.hpp): this kernel consumes it.
    // (Empty unless strategy.tp_comm_overlap: no hash of the rank on every kernel.)
    if (!pending_.empty()) {
      auto it = pending_.find(lp.r().rank);
      if (it != pending_.end()) {
        lp.deps.push_back({it->second, DepKind::kStreamWaits});
        pending_.erase(it);
      }
    }
    issue(lp, lp.forward() ? sl.fwd_before : sl.bwd_before);
  }
  void end_layer(LayerPass& lp) override {
    const ShardedLayer& sl = layer(lp);
    if (overlaps_wgrad(e_, lp)) {  // docs/program.md, "TP communication overlap"
      RankState& r = lp.r();
      const OpId dgrad = lp.kernel;
      const Bytes bytes = e_.per_micro_batch(sl.comm_bytes_per_sample);
      pending_[r.rank] = e_.coll(r, tp_stream_.at(r.rank),
                                 op_names::collective("tp", CollectiveKind::kAllReduce, ""),
                                 CollectiveKind::kAllReduce, r.group[ParallelDim::kTp], bytes,
                                 {{dgrad, DepKind::kStreamWaits}}, lp.phase);
      split_wgrad(e_, r, dgrad);
      return;
    }
    issue(lp, lp.forward() ? sl.fwd_after : sl.bwd_after);
  }

 private:
  Emitter& e_;
  std::unordered_map<int, int> tp_stream_;  // rank -> its "tp" stream (overlap only)
  std::unordered_map<int, OpId> pending_;   // rank -> all-reduce the next kernel waits for

  // "tp all_reduce", ...: interned once per kind (a plain name; one per layer pass otherwise).
  std::array<NameId, 16> names_{};
  std::array<bool, 16> named_{};
  NameId name_of(CollectiveKind k) {
    const auto i = static_cast<std::size_t>(k);
    if (!named_[i]) {
      names_[i] = op_names::collective("tp", k, "").intern(e_.builder().names());
      named_[i] = true;
    }
    return names_[i];
  }

  const ShardedLayer& layer(const LayerPass& lp) const {
    return e_.plan().sharded[static_cast<std::size_t>(lp.layer)];
  }

  void issue(LayerPass& lp, TpComm c) {
    if (c == TpComm::kNone) return;
    CollectiveKind k = CollectiveKind::kAllReduce;
    if (c == TpComm::kReduceScatter) k = CollectiveKind::kReduceScatter;
    if (c == TpComm::kAllGather) k = CollectiveKind::kAllGather;
    RankState& r = lp.r();
    const Bytes bytes = e_.per_micro_batch(layer(lp).comm_bytes_per_sample);
    r.last_compute =
        e_.coll(r, r.compute, name_of(k), k, r.group[ParallelDim::kTp], bytes, {}, lp.phase);
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_tensor_parallel_piece(Emitter& e) {
  return std::make_unique<TensorParallelPiece>(e);
}

}  // namespace hybrid

Program lower_tensor_parallel(const Scenario& s, Progress* progress) {
  const ParallelSpec& ps = s.strategy.parallel;
  std::string label = "tensor_parallel (tp " + std::to_string(ps.tp);
  if (ps.sequence_parallel) label += ", sequence parallel";
  if (ps.dp > 1) label += ", dp " + std::to_string(ps.dp);
  return lower_hybrid(s, label + ")", progress);
}

}  // namespace csim::core
