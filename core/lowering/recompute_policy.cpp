// torchtitan's activation-checkpointing policies beyond Megatron's none / selective / full
// (docs/program.md, "Activation recompute"; torchtitan, torchtitan/distributed/
// activation_checkpoint.py, _apply_ac_to_transformer_block):
//   full every k-th block  selective_ac_option "<k>" (_apply_layer_sac): a counter over the
//                          blocks, starting at 1, checkpoints the blocks where it is a multiple
//                          of k, so 0-based block b iff (b + 1) mod k = 0 (k = 1: every block)
//   selective_op           selective_ac_option "op" (_apply_op_sac): the block is checkpointed,
//                          but the outputs of the ops in its save list are kept: aten.mm (every
//                          other one: the 1st, 3rd, ... mm of the block; "saves output of all
//                          compute ops, except every second mm") and the fused SDPA kernels; the
//                          rest (norms, pointwise ops, every second mm, an eager attention core)
//                          is recomputed before the block's backward.
// In the layer list a linear layer (a GEMM with parameters) is one aten.mm; a fused attention
// kernel is an attention layer the model does not mark for Megatron's selective recompute (the
// eager core's scores / softmax / dropout / A.V are marked and are recomputed, as their bmm,
// softmax and dropout are not in the save list).
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

bool block_checkpointed(int block, int every) {
  return block >= 0 && every >= 1 && (block + 1) % every == 0;
}

bool sac_op_output_saved(const ModelSpec& m, int layer) {
  const LayerSpec& l = m.layers[static_cast<std::size_t>(layer)];
  if (l.block < 0) return true;  // outside the checkpointed blocks nothing is recomputed
  if (l.kind == ComputeKind::kAttention) return !l.selective_recompute;
  if (l.kind != ComputeKind::kGemm || l.params <= 0) return false;
  int mm = 0;  // this linear layer's ordinal in its block, from 1
  for (int i = layer; i >= 0 && m.layers[static_cast<std::size_t>(i)].block == l.block; --i) {
    const LayerSpec& k = m.layers[static_cast<std::size_t>(i)];
    if (k.kind == ComputeKind::kGemm && k.params > 0) ++mm;
  }
  return mm % 2 == 1;
}

}  // namespace csim::core
