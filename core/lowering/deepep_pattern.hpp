// DeepEP's traffic over an expert-parallel group (docs/program.md, "MoE token dispatchers",
// "DeepEP"), as the traffic matrix of a weighted all-to-all (CommGroup::a2a_shares).
//
// DeepEP's normal (high-throughput) kernels send a token once to every GPU holding one of its
// experts, not once per expert as NCCL's all-to-all of Megatron's permuted copies does. Between
// nodes a token crosses the network once per destination node, over RDMA to the GPU of the same
// local index there, which forwards it over NVLink to the node's GPUs holding its experts
// (DeepEP's README: "forwarding data from NVLink domain to RDMA domain"; DeepSeek-V3 report,
// section 3.2.2). Node-limited routing follows from the router's groups (DeepSeek-V3's n_group,
// topk_group) when they lie on nodes: each token reaches at most topk_group groups.
#pragma once

#include <vector>

#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// The chance that a token's k experts, chosen under balanced routing, include at least one of the
// experts in `held` (expert indices): the router picks group_top_k of its groups uniformly, then
// k distinct experts uniformly among the picked groups' experts.
double chance_token_reaches(const MoeConfig& moe, const std::vector<int>& held);

// The traffic matrix of a DeepEP dispatch (or combine, its mirror) over `gpus` (the EP group in
// rank order; member i holds experts [i E / p, (i + 1) E / p)), each GPU's node gpu /
// gpus_per_node. shares[a p + c]: the bytes member a sends member c, as a fraction of S = the
// e s k h bytes of its k routed copies per token (the bytes NCCL's all-to-all is given), i.e.
// expected tokens sent / k:
//   c in a's node:   (1 + f_a) x P(c) / k, f_a the members of other nodes that reach a's node
//                    through a (its own tokens, and the ones it forwards);
//   c in node v != a's, c the member of v at a's position there: P(v) / k (the RDMA copy);
// P(c), P(v): chance_token_reaches of c's experts, of v's experts.
std::vector<double> deepep_a2a_shares(const std::vector<int>& gpus, int gpus_per_node,
                                      const MoeConfig& moe);

}  // namespace csim::core
