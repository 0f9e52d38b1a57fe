// The saved activations a pipeline stage holds at once in its backward phase, for tune's memory
// bound (docs/sweep.md, "Tune", "Bounds": A). The lowering (core/lowering/pipeline.cpp,
// PipelinePiece) allocates a segment's saved activations, one block of
// round(rank_stored_activation_bytes_per_sample x micro_batch_size) bytes, when a forward pass of
// the segment opens and frees it when that micro-batch's backward pass of the segment closes; the
// gradients are allocated when the stage's first backward pass opens (hybrid_emitter.cpp,
// open_pass). So at the close of that backward pass the stage holds the saved activations of
// every forward pass it ran before it, with the gradients.
#pragma once

#include <vector>

#include "core/scenario/scenario.hpp"

namespace csim::sweep {

// Per chunk (0 .. chunks - 1) on stage s of p, m micro-batches: the forward passes whose saved
// activations the stage holds at one moment of its backward phase, the gradients allocated:
//   GPipe        n_0 = m                                       (at its first backward)
//   1F1B         n_0 = min(p - s, m)                           (warm-up p - s - 1, one steady F)
//   interleaved  n = min(w + 1, m v), w = 2 (p - s - 1) + (v - 1) p (w = m v when m = p):
//                forward k runs chunk floor((k mod p v) / p), so
//                n_c = floor(n / (p v)) p + min(p, max(0, (n mod p v) - c p))
//   DualPipeV    n_0 = 2p - s, n_1 = s + 1                     (phase 4's first backward)
// The moe_a2a_overlap order (core/lowering/moe_a2a_overlap.cpp) runs a longer prefix of the same
// forwards before its first backward, so these counts are lower bounds there too.
std::vector<int> held_chunk_passes(core::PipelineSchedule schedule, int stages, int chunks,
                                   int micro, int stage);

}  // namespace csim::sweep
