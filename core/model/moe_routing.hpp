// Routing imbalance (docs/transformer.md, "Routing imbalance"): the share of each MoE block's
// routed token copies every expert receives, sampled per block and micro-batch from the
// scenario's seed (MoeRouting), and what it means for the ranks of an expert-parallel group.
// Deterministic on every platform: its own generator (splitmix64) and samplers, no <random>
// distribution (their algorithms are implementation-defined).
#pragma once

#include <cstdint>
#include <vector>

#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// The E experts' shares (summing to 1) of MoE block `block` in micro-batch `micro`:
//   balanced   1 / E each
//   zipf       (1 / r^skew) / sum_r (1 / r^skew), the ranks r = 1..E given to the experts in a
//              random order
//   dirichlet  a sample of Dirichlet(concentration, ..., concentration): independent
//              Gamma(concentration, 1) draws, normalised
//   histogram  tokens[i] / sum(tokens), the same for every block and micro-batch
std::vector<double> expert_shares(const MoeConfig& m, int block, std::int64_t micro);

// The shares the experts compute under moe.capacity_factor c (docs/transformer.md, "Capacity and
// dropped tokens"): min(share, c / E) each, or c / E each with pad_to_capacity; the shares as
// given when c is 0 (dropless).
std::vector<double> kept_shares(const MoeConfig& m, const std::vector<double>& shares);
// The share of the routed copies dropped: sum of max(0, share - c / E); 0 when dropless.
double dropped_share(const MoeConfig& m, const std::vector<double>& shares);
// Whether every EP rank of every MoE layer computes the balanced load (1): balanced routing and
// no capacity below it, no padding.
bool uniform_expert_load(const MoeConfig& m);

// Per rank of an EP group of `ep` ranks, rank j holding experts [j E / ep, (j + 1) E / ep)
// (Megatron's local experts): ep x the sum of its experts' shares, its load relative to balanced
// routing (1 each when balanced; their mean is 1).
std::vector<double> ep_rank_loads(const std::vector<double>& shares, int ep);

// What a run's routing samples amount to (the summary's "routing" line; docs/summary.md): over
// every MoE block and micro-batch of a step, the mean and the largest of max / mean tokens per
// expert (max share x E, as routed) and per EP rank (max load, as computed: capacity applied),
// per EP rank how many of those layers it was the busiest in (the first of equals), and the share
// of routed copies dropped.
struct RoutingStats {
  int samples = 0;  // MoE blocks x micro-batches
  double expert_max_over_mean = 1, worst_expert_max_over_mean = 1;
  double rank_max_over_mean = 1, worst_rank_max_over_mean = 1;
  std::vector<int> busiest_rank_count;  // per EP rank
  // Under a capacity factor: the mean and the largest share of routed copies dropped.
  double dropped = 0, worst_dropped = 0;
};
RoutingStats routing_stats(const TransformerConfig& c, int ep, std::int64_t micro_batches);

}  // namespace csim::core
