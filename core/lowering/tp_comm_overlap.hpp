// Megatron's async tensor-parallel all-reduce in the backward (docs/program.md, "Tensor
// parallel", "TP communication overlap"). Internal to core/lowering.
#pragma once

#include "core/lowering/hybrid_emitter.hpp"

namespace csim::core::hybrid {

// Whether the backward kernel of `lp` (lp.kernel) is split into its input- and
// weight-gradient GEMMs so that the input-gradient all-reduce runs beside the weight gradient:
// strategy.tp_comm_overlap, no sequence parallelism, a column-parallel layer with a GEMM shape
// whose backward ends in a TP all-reduce, and not the segment's first layer (the pass's last
// kernel, which the pipeline's send follows).
bool overlaps_wgrad(Emitter& e, const LayerPass& lp);

// Splits the backward kernel `bwd` in place into its dgrad (kept at `bwd`) and a new wgrad kernel
// on the same stream, each with half the FLOPs, traffic and host time (the two GEMMs of a linear
// layer's backward have the same 2 m n k FLOPs). The wgrad op is issued now, after whatever
// other pieces issued since `bwd`, and becomes r.last_compute. Returns it.
OpId split_wgrad(Emitter& e, RankState& r, OpId bwd);

}  // namespace csim::core::hybrid
