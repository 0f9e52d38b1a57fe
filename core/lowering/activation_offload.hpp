// Activation offload: Megatron-Core's cpu_offloading with cpu_offloading_num_layers K
// (megatron/core/transformer/transformer_config.py; TransformerBlock wraps each transformer layer
// in TransformerEngine's CPU-offload context and commits its output as one group,
// megatron/core/transformer/transformer_block.py, TransformerBlock.forward), run by TE's
// AsyncDoubleBufferGroupOffloadHandler (transformer_engine/pytorch/cpu_offload.py,
// get_cpu_offload_context). docs/program.md, "Activation offload", derives every figure below.
//
// Of the rank's L transformer blocks (pp 1: every block), the saved activations of blocks
// 0..K-1 (group i = block i) travel to pinned host memory and back, on two copy streams of their
// own (the handler's d2h_stream and h2d_stream), over the GPU's host link:
//   window   group i's offload is settled at the forward commit of block w_i and its reload
//            issued at the backward commit of block w_i (the handler's layer_window_map):
//              w_i = floor(L/K) (i + 1) - 1 + min(i + 1, L mod K)
//            (w_{K-1} = L - 1; w_i >= i + 1 for K < L, so a group is reloaded before the block
//            that needs it and settled after the next group's block has run)
//   forward  after block 0's forward the D2H of group 0 waits for the compute stream; at the
//            commit of block w_i the compute stream waits for that D2H, group i's GPU copy is
//            freed, and the D2H of group i + 1 starts (waiting for the compute stream)
//   backward before block w_i's backward (i from K-1 down) the compute stream waits for the
//            H2D issued before, group i is reallocated and copied back on the H2D stream
//            (which waits for the compute stream); before block 0's backward the compute stream
//            waits for the last H2D; a reloaded group is freed after its block's backward
//   bytes    group i: block i's saved activations of one micro-batch, b x a_i (the rank's share,
//            core::rank_stored_activation_bytes_per_sample); each way, per micro-batch,
//            sum over i < K of b x a_i
//   memory   under offload every block's saved activations are allocated as its forward starts
//            and freed after its backward (autograd frees a node's saved tensors once it ran);
//            without offload the lowering holds a segment's as one allocation until its
//            backward ends (pipeline.cpp), which gives the same peak where that falls at the
//            end of the forward, as it does in steady steps
// The model offloads every saved tensor of the block (TE offloads the tensors its modules mark
// with activation_offloading; Megatron's own ops' saved tensors stay: an upper bound of what
// moves, a lower bound of what stays).
#pragma once

#include <cstdint>
#include <vector>

#include "core/lowering/parallel_plan.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

// TE's layer_window_map for K offloaded groups of L layers (above): w_i for i < K.
std::vector<int> offload_window_map(int groups, int layers);

// Every transformer block of one segment under strategy.activation_offload (empty without), in
// order: the first K offloaded (group i = block i). Under offload the ActivationOffloadPiece owns
// every block's saved activations: allocated as the block's forward starts, freed after its
// backward (docs/program.md, "Activation offload").
struct ActivationOffloadGroup {
  int block = 0;                // transformer block index (= group index)
  int first = 0, end = 0;       // its layers [first, end) in the model
  double bytes_per_sample = 0;  // a_i: its saved activations per sample, the rank's share
  bool offloaded = false;       // i < K
  int window = -1;              // w_i (offloaded only)
};
std::vector<ActivationOffloadGroup> activation_offload_groups(const ModelSpec& m,
                                                              const ParallelSpec& ps, Segment seg);

// sum over the offloaded groups of a_i: what leaves the GPU per sample of a micro-batch (0
// without strategy.activation_offload). tune's memory bound subtracts it (docs/sweep.md).
double offloaded_activation_bytes_per_sample(const ModelSpec& m, const ParallelSpec& ps,
                                             Segment seg);

}  // namespace csim::core
