// HBM traffic of NCCL kernels (docs/cost-model.md, "Resource sharing", HBM): what a member's
// kernel reads and writes in its own GPU's memory, which the kernels running beside it share.
#pragma once

#include <span>

#include "core/program/program.hpp"

namespace csim::core {

// HBM bytes one member of a collective of `kind` over `p` ranks on `bytes` (nccl-tests' S) moves
// on its GPU: h x busbw_factor(kind, p) x S, the bytes it receives over its links times the
// accesses each received byte costs (h = 4 for reducing kinds, 3 for the others, 2 for a
// send/recv member: docs, "Resource sharing"); with NVLS (`algo` the plan's algorithm) the switch
// reduces and multicasts, so a member reads its input and writes its output once: 2 x S.
double nccl_hbm_bytes(CollectiveKind kind, CollectiveAlgo algo, int p, double bytes);

// The HBM bandwidth one more participant gets when it asks for more than the others can leave it:
// the water level of max-min sharing of `capacity` among `asks` and it (docs/cost-model.md,
// "Resource sharing"); a kernel asking a gets min(a, level). `asks` is reordered.
double hbm_level(double capacity, std::span<double> asks);

}  // namespace csim::core
