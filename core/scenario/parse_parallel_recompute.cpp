// Activation recompute's keys (core/scenario/parse_parallel.hpp): none, selective, full or
// selective_op (torchtitan's per-op policy), and recompute_every (full: every k-th block,
// torchtitan's selective_ac_option "<k>"); they work on transformer blocks, so recompute needs
// model.gpt.
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_recompute(const ParallelInput& in, ParallelSpec& ps) {
  const Obj& o = in.o;
  ps.recompute = static_cast<RecomputeMode>(
      o.choice("recompute", {"none", "selective", "full", "selective_op"}, 0));
  if (ps.recompute != RecomputeMode::kNone && !in.gpt()) {
    in.ctx.fail(o.at("recompute"),
                "activation recompute works on transformer blocks: it needs model.gpt",
                "use recompute none");
  }
  ps.recompute_every = static_cast<int>(o.integer("recompute_every", 1, 1, 1 << 20));
  if (o.has("recompute_every") && ps.recompute != RecomputeMode::kFull) {
    in.ctx.fail_conflict({o.at("recompute_every"), o.at("recompute")},
                         "recompute_every applies to recompute full",
                         "set recompute \"full\" to checkpoint every k-th block");
  }
  if (ps.recompute == RecomputeMode::kFull && ps.recompute_every > in.model.transformer.layers) {
    in.ctx.fail_conflict({o.at("recompute_every"), "model.gpt.layers"},
                         "recompute_every " + std::to_string(ps.recompute_every) + " exceeds the " +
                             std::to_string(in.model.transformer.layers) +
                             " blocks: no block would be checkpointed",
                         "use recompute none, or k <= layers");
  }
}

}  // namespace csim::core::parse
