// The GEMM shape a layer's kernel runs on one rank (docs/cost-model.md, "GEMM shape").
#include "core/lowering/gemm_shape_lowering.hpp"

#include <cmath>

namespace csim::core {

GemmShape rank_gemm_shape(const LayerSpec& l, std::int64_t samples, const ParallelSpec& ps,
                          double op_flops, bool backward) {
  if (l.kind != ComputeKind::kGemm || l.gemm.empty() || samples <= 0) return {};
  const int tp = ps.tp, cp = ps.cp;
  GemmShape g = l.gemm;
  g.m *= samples;
  // Expert parallelism: E / ep grouped GEMMs, each on the whole EP group's copies for its expert
  // (docs/program.md, "Expert parallel"; balanced routing).
  if (ps.ep > 1 && l.expert_role != ExpertRole::kNone) {
    g.batch /= ps.ep;
    g.m *= ps.ep;
  }
  // Context parallelism: each rank's s / cp tokens (the parser makes 2 cp divide s).
  if (cp > 1) g.m /= cp;
  if (l.expert_role != ExpertRole::kNone) {
    // Each tp rank routes its own s / tp tokens (shard_layer).
    if (tp > 1) g.m /= tp;
    // Expert tensor parallelism (docs/program.md, "Expert tensor parallel"): etp times the
    // tokens after the all-gather, experts.fc on 2 f_e / etp columns, experts.proj on f_e / etp
    // rows (the parser makes etp divide f_e); the same FLOPs.
    if (ps.etp > 1) {
      g.m *= ps.etp;
      if (l.tp_role == TpRole::kColumn) g.n /= ps.etp;
      if (l.tp_role == TpRole::kRow) g.k /= ps.etp;
    }
  } else if (tp > 1) {
    // Megatron's column-parallel layers split the weight's output columns, row-parallel ones its
    // input rows (docs/program.md, "Tensor parallel"); shard_layer divides their FLOPs by tp.
    if (l.tp_role == TpRole::kColumn || l.tp_role == TpRole::kVocabOutput)
      g.n = (g.n + tp - 1) / tp;
    else if (l.tp_role == TpRole::kRow)
      g.k = (g.k + tp - 1) / tp;
  }
  const double shape_flops = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m) *
                             static_cast<double>(g.n) * static_cast<double>(g.k) *
                             (backward ? 2.0 : 1.0);
  if (!(std::abs(shape_flops - op_flops) <= 1e-6 * shape_flops)) return {};
  return g;
}

}  // namespace csim::core
