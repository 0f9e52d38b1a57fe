// Activation recompute's key (core/parse_parallel.hpp): none, selective or full; it works on
// transformer blocks, so selective and full need model.gpt.
#include "core/parse_parallel.hpp"

namespace csim::core::parse {

void validate_recompute(const ParallelInput& in, ParallelSpec& ps) {
  ps.recompute =
      static_cast<RecomputeMode>(in.o.choice("recompute", {"none", "selective", "full"}, 0));
  if (ps.recompute != RecomputeMode::kNone && !in.gpt()) {
    in.ctx.fail(in.o.at("recompute"),
                "activation recompute works on transformer blocks: it needs model.gpt",
                "use recompute none");
  }
}

}  // namespace csim::core::parse
