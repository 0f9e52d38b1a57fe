// Activation recompute (docs/program.md, "Activation recompute"; Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", sections 4 and 5).
//
// Activations per transformer block per sample, in bytes with 2-byte elements (table 2):
//   no parallelism                 sh(34 + 5as/h)
//   tensor parallel (t)            sh(10 + 24/t + 5as/(ht))
//   tensor + sequence parallel     sh(34/t + 5as/(ht))
//   selective recompute            drops the 5as/h term (scores, softmax, dropout recomputed)
//   full recompute                 2sh (the block input; /t with sequence parallelism)
// The per-layer split of the 34 (see core/model_builders.cpp) and shard_layer give all of them.
// The lowering re-runs the recomputed forward work right before the backward that needs it:
// selective recompute the attention core's forward, full recompute the whole block's forward
// (with its tensor-parallel collectives), holding that block's full activations meanwhile.
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

double stored_activation_bytes_per_sample(const ModelSpec& m, Segment seg, int tp, bool sp,
                                          RecomputeMode mode) {
  double bytes = 0;
  for (int i = seg.first; i < seg.end; ++i) {
    const LayerSpec& l = m.layers[static_cast<std::size_t>(i)];
    const ShardedLayer sl = shard_layer(m, i, tp, sp);
    if (mode == RecomputeMode::kNone || l.block < 0) {
      bytes += sl.act_bytes_per_sample;
    } else if (mode == RecomputeMode::kSelective) {
      bytes += sl.selective_act_bytes_per_sample;
    } else {
      // Full: a block keeps only its input, which its first layer (ln_1) saves.
      const bool first_of_block =
          i == 0 || m.layers[static_cast<std::size_t>(i - 1)].block != l.block;
      if (first_of_block) bytes += sl.act_bytes_per_sample;
    }
  }
  return bytes;
}

}  // namespace csim::core
