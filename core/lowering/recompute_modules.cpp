// Megatron-Core's selective recompute modules in the lowering (docs/program.md, "Recompute
// modules"; megatron/core/transformer/transformer_config.py, recompute_modules; the groups:
// core/model/recompute_modules.hpp).
//
// Saved bytes per sample of a layer i under recompute "selective" with modules M (before: what
// the layer saves with core_attn alone, or with nothing when core_attn is not in M):
//   output-discarding group (moe_act, layernorm, mla_up_proj; CheckpointWithoutOutput)
//     member whose input comes from outside the group   min(saved_i, out_{i-1})  (the
//                                                        checkpoint's saved input)
//     member fed by another member                      0
//     the consumer c (the layer after the group)        saved_c - min(saved_c, out_last)
//                                                        (the output's storage is freed)
//   ordinary checkpoint (mlp, moe, shared_experts; tensor_parallel.checkpoint)
//     first member                                       min(saved_i, out_{i-1})
//     the others                                         0
// The RecomputeModulesPiece re-runs a group's forward (its members, in order, with their
// tensor- and expert-parallel collectives) before the backward of the layer that needs it: the
// consumer's for an output-discarding group (Megatron registers the recompute as a gradient hook
// on the consumer's output), the group's last member's otherwise; it holds what the re-run
// recreates (the members' full saved bytes less those kept, plus the consumer's dropped bytes)
// until the backward of the group's first member is done.
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/recompute_modules.hpp"

namespace csim::core {

ModuleStored module_stored_bytes(const ModelSpec& m, Segment seg, std::uint8_t modules,
                                 const std::vector<ShardedLayer>& sl, double input_bytes) {
  ModuleStored out;
  const auto at = [&](int i) -> const ShardedLayer& {
    return sl[static_cast<std::size_t>(i - seg.first)];
  };
  const bool core = (modules & recompute_module::kCoreAttn) != 0;
  for (int i = seg.first; i < seg.end; ++i)
    out.layer.push_back(core ? at(i).selective_act_bytes_per_sample : at(i).act_bytes_per_sample);
  const auto stored = [&](int i) -> double& {
    return out.layer[static_cast<std::size_t>(i - seg.first)];
  };
  const auto input = [&](int i) {
    if (i > seg.first) return at(i - 1).output_bytes_per_sample;
    return input_bytes >= 0 ? input_bytes : stored(i);
  };
  for (RecomputeGroup& g : recompute_groups(m, seg.first, seg.end, modules)) {
    const bool discards = recompute_module_discards_output(g.module);
    double recreated = 0;
    for (std::size_t k = 0; k < g.layers.size(); ++k) {
      const int i = g.layers[k];
      const bool fed_inside = k > 0 && g.layers[k - 1] == i - 1;
      const bool keeps_input = discards ? !fed_inside : k == 0;
      const double keep = keeps_input ? std::min(stored(i), input(i)) : 0.0;
      recreated += at(i).act_bytes_per_sample - keep;
      stored(i) = keep;
    }
    if (g.consumer >= 0) {
      const double drop = std::min(stored(g.consumer), at(g.layers.back()).output_bytes_per_sample);
      stored(g.consumer) -= drop;
      recreated += drop;
    }
    out.groups.push_back(ModuleGroupBytes{std::move(g), recreated});
  }
  return out;
}

double module_stored_activation_bytes_per_sample(const ModelSpec& m, Segment seg, int tp, bool sp,
                                                 std::uint8_t modules) {
  std::vector<ShardedLayer> sl;
  for (int i = seg.first; i < seg.end; ++i) sl.push_back(shard_layer(m, i, tp, sp));
  const double input =
      seg.first > 0 ? shard_layer(m, seg.first - 1, tp, sp).output_bytes_per_sample : -1.0;
  double bytes = 0;
  for (double b : module_stored_bytes(m, seg, modules, sl, input).layer) bytes += b;
  return bytes;
}

std::string recompute_label(const ParallelSpec& ps) {
  std::string out = to_string(ps.recompute);
  if (ps.recompute != RecomputeMode::kSelective ||
      ps.recompute_modules == recompute_module::kCoreAttn)
    return out;
  std::string mods;
  for (int b = 0; b < recompute_module::kCount; ++b) {
    if (ps.recompute_modules & (1u << b))
      mods += std::string(mods.empty() ? "" : ", ") + recompute_module::name(b);
  }
  return out + " (" + mods + ")";
}

namespace hybrid {
namespace {

class RecomputeModulesPiece final : public ParallelPiece {
 public:
  explicit RecomputeModulesPiece(Emitter& e) : e_(e) {}

  void begin_layer(LayerPass& lp) override {
    if (lp.phase != StepPhase::kBackward || !active()) return;
    const Plan& plan = e_.plan();
    const Segment sg = lp.sp.sg;
    for (const Trigger& t : triggers_[static_cast<std::size_t>(lp.layer)]) {
      const ModuleGroupBytes& g = groups_[static_cast<std::size_t>(t.group)];
      if (g.group.layers.front() < sg.first) continue;
      const Bytes bytes = e_.per_micro_batch(g.recreated);
      RankState& r = lp.r();
      if (bytes > 0) {
        e_.builder().alloc(
            r.thread, r.compute, r.gpu, MemCategory::kActivations, bytes,
            NameRef::cat({lp.sp.prefix, "recomputed ", module_name(g)}, lp.sp.micro));
        held_[{&lp.sp, g.group.layers.front()}].push_back({bytes, t.group});
      }
      bool first = true;
      for (int k : g.group.layers) {
        LayerPass rp{lp.sp, k, plan.unit_of_layer[static_cast<std::size_t>(k)],
                     StepPhase::kRecompute};
        if (first) rp.deps = lp.deps;
        first = false;
        e_.emit_layer(rp);
      }
      lp.deps.clear();
    }
  }

  void end_layer(LayerPass& lp) override {
    if (lp.phase != StepPhase::kBackward || held_.empty()) return;
    const auto it = held_.find({&lp.sp, lp.layer});
    if (it == held_.end()) return;
    RankState& r = lp.r();
    for (const auto& [bytes, group] : it->second) {
      e_.builder().release(r.thread, r.compute, r.gpu, MemCategory::kActivations, bytes,
                           NameRef::cat({lp.sp.prefix, "recomputed ",
                                         module_name(groups_[static_cast<std::size_t>(group)])},
                                        lp.sp.micro));
    }
    held_.erase(it);
  }

 private:
  struct Trigger {
    int group = 0;
  };
  Emitter& e_;
  bool planned_ = false;
  std::vector<ModuleGroupBytes> groups_;        // every segment's, per sample on this rank
  std::vector<std::vector<Trigger>> triggers_;  // per layer: groups re-run before its backward
  // (pass, first member) -> what the re-runs hold until that member's backward is done
  std::map<std::pair<const SegmentPass*, int>, std::vector<std::pair<Bytes, int>>> held_;

  static std::string module_name(const ModuleGroupBytes& g) {
    int bit = 0;
    while ((g.group.module >> bit) > 1) ++bit;
    return recompute_module::name(bit);
  }

  // The groups of every segment from the plan's sharded layers (context and expert splits
  // included), once.
  bool active() {
    if (planned_) return !groups_.empty();
    planned_ = true;
    const ParallelSpec& ps = e_.spec();
    if (ps.recompute != RecomputeMode::kSelective ||
        (ps.recompute_modules & static_cast<std::uint8_t>(~recompute_module::kCoreAttn)) == 0)
      return false;
    const ModelSpec& m = e_.scenario().model;
    const Plan& plan = e_.plan();
    triggers_.assign(m.layers.size(), {});
    for (const Segment& sg : plan.segs) {
      const std::vector<ShardedLayer> sl(plan.sharded.begin() + sg.first,
                                         plan.sharded.begin() + sg.end);
      const double input =
          sg.first > 0
              ? plan.sharded[static_cast<std::size_t>(sg.first - 1)].output_bytes_per_sample
              : -1.0;
      for (ModuleGroupBytes& g :
           module_stored_bytes(m, sg, ps.recompute_modules, sl, input).groups) {
        const int at = g.group.consumer >= 0 ? g.group.consumer : g.group.layers.back();
        triggers_[static_cast<std::size_t>(at)].push_back({static_cast<int>(groups_.size())});
        groups_.push_back(std::move(g));
      }
    }
    return !groups_.empty();
  }
};

}  // namespace

std::unique_ptr<ParallelPiece> make_recompute_modules_piece(Emitter& e) {
  return std::make_unique<RecomputeModulesPiece>(e);
}

}  // namespace hybrid
}  // namespace csim::core
