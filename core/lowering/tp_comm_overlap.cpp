// Megatron's async tensor-parallel all-reduce in the backward (docs/program.md, "TP
// communication overlap"): Megatron's LinearWithGradAccumulationAndAsyncCommunication computes a
// column-parallel layer's input gradient, starts its all-reduce asynchronously, then computes the
// weight gradient while the all-reduce runs; the layer before waits for the all-reduce.
#include "core/lowering/tp_comm_overlap.hpp"

#include "core/lowering/parallel_plan.hpp"

namespace csim::core::hybrid {

bool overlaps_wgrad(Emitter& e, const LayerPass& lp) {
  const ParallelSpec& ps = e.spec();
  if (lp.forward() || !ps.tp_comm_overlap || ps.sequence_parallel || ps.tp <= 1) return false;
  if (lp.layer == lp.sp.sg.first) return false;
  const ShardedLayer& sl = e.plan().sharded[static_cast<std::size_t>(lp.layer)];
  if (sl.bwd_after != TpComm::kAllReduce) return false;
  if (lp.kernel == kNoOp) return false;
  const Op& op = e.builder().program().ops[static_cast<std::size_t>(lp.kernel)];
  return op.kind == OpKind::kCompute && op.compute_kind == ComputeKind::kGemm && !op.gemm.empty() &&
         op.gemm_pass == GemmPass::kBackward;
}

OpId split_wgrad(Emitter& e, RankState& r, OpId bwd) {
  ProgramBuilder& b = e.builder();
  Op d = b.program().ops[static_cast<std::size_t>(bwd)];
  const Lane lane{d.thread, d.gpu, d.stream};
  const OpId w = b.compute(lane, NameRef::cat({b.names().pattern(d.name), " (wgrad)"}, d.name.field), ComputeKind::kGemm, d.flops / 2,
                           d.bytes - d.bytes / 2, 0, false, {}, d.phase, d.batch);
  Op& wo = b.program().ops[static_cast<std::size_t>(w)];
  wo.dtype = d.dtype;
  wo.max_efficiency = d.max_efficiency;
  wo.gemm = d.gemm;
  wo.gemm_pass = GemmPass::kWgrad;
  wo.python_ns = d.python_ns / 2;
  wo.dispatch_ns = d.dispatch_ns / 2;
  Op& dg = b.program().ops[static_cast<std::size_t>(bwd)];
  dg.flops = d.flops / 2;
  dg.bytes = d.bytes / 2;
  dg.gemm_pass = GemmPass::kDgrad;
  dg.python_ns -= wo.python_ns;
  dg.dispatch_ns -= wo.dispatch_ns;
  r.last_compute = w;
  return w;
}

}  // namespace csim::core::hybrid
