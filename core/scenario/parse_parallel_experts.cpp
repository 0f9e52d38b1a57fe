// A mixture-of-experts model under the parallel strategies (core/scenario/parse_parallel.hpp;
// docs/scenario.md, "model.transformer.moe"): every expert is on every rank (no expert
// parallelism yet), so the dimensions that leave tokens or weights whole per rank compose with it
// (data parallelism, ZeRO, FSDP, pipeline and context parallelism); tensor parallelism would
// split the experts as Megatron's expert tensor parallelism does, which is not modelled yet.
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_experts(const ParallelInput& in, ParallelSpec& ps) {
  if (!in.model.transformer_config.moe.any() || ps.tp <= 1) return;
  in.ctx.fail_conflict({in.o.at("tp"), "model.transformer.moe"},
                       "tp " + std::to_string(ps.tp) +
                           " would split the experts (Megatron's expert tensor parallelism), "
                           "which is not modelled yet",
                       "use tp 1 with a mixture of experts: dp, ZeRO / FSDP, pp and cp compose "
                       "with it");
}

}  // namespace csim::core::parse
