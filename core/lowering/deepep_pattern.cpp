// DeepEP's traffic matrix (core/lowering/deepep_pattern.hpp; docs/program.md, "DeepEP").
#include "core/lowering/deepep_pattern.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace csim::core {

namespace {

// C(a - s, k) / C(a, k): no pick among `a` of k distinct lands in `s` given ones.
double none_of(int a, int s, int k) {
  if (s <= 0) return 1.0;
  if (a - s < k) return 0.0;
  double r = 1.0;
  for (int i = 0; i < k; ++i) r *= static_cast<double>(a - s - i) / static_cast<double>(a - i);
  return r;
}

}  // namespace

double chance_token_reaches(const MoeConfig& moe, const std::vector<int>& held) {
  const int e = moe.experts, k = moe.top_k;
  CSIM_ASSERT(e > 0 && k > 0 && k <= e);
  const bool grouped = moe.router.groups > 1 && e % moe.router.groups == 0;
  const int g = grouped ? moe.router.groups : 1, t = grouped ? moe.router.group_top_k : 1;
  const int per_group = e / g, allowed = t * per_group;
  // x[j]: the held experts in router group j.
  std::vector<int> x(static_cast<std::size_t>(g), 0);
  for (int ex : held) ++x[static_cast<std::size_t>(ex / per_group)];
  // ways[j][s]: the ways to pick j groups holding s of the held experts (doubles: C(g, t) may
  // exceed 2^64), over the groups one at a time.
  const int total = static_cast<int>(held.size());
  std::vector<std::vector<double>> ways(static_cast<std::size_t>(t) + 1,
                                        std::vector<double>(static_cast<std::size_t>(total) + 1));
  ways[0][0] = 1.0;
  for (int j = 0; j < g; ++j) {
    const int xj = x[static_cast<std::size_t>(j)];
    for (int picked = std::min(t, j + 1); picked >= 1; --picked)
      for (int s = total; s >= xj; --s)
        ways[static_cast<std::size_t>(picked)][static_cast<std::size_t>(s)] +=
            ways[static_cast<std::size_t>(picked) - 1][static_cast<std::size_t>(s - xj)];
  }
  double all = 0, none = 0;
  for (int s = 0; s <= total; ++s) {
    const double w = ways[static_cast<std::size_t>(t)][static_cast<std::size_t>(s)];
    all += w;
    none += w * none_of(allowed, s, k);
  }
  return all > 0 ? 1.0 - none / all : 0.0;
}

std::vector<double> deepep_a2a_shares(const std::vector<int>& gpus, int gpus_per_node,
                                      const MoeConfig& moe) {
  const int p = static_cast<int>(gpus.size());
  CSIM_ASSERT(p >= 1 && moe.experts % p == 0 && gpus_per_node >= 1);
  const int per_rank = moe.experts / p;
  // Members by node, in rank order (a member's position there is its local index).
  std::map<int, std::vector<int>> nodes;
  for (int i = 0; i < p; ++i) nodes[gpus[static_cast<std::size_t>(i)] / gpus_per_node].push_back(i);
  std::vector<int> node_of(static_cast<std::size_t>(p)), pos_of(static_cast<std::size_t>(p));
  for (const auto& [node, members] : nodes)
    for (std::size_t j = 0; j < members.size(); ++j) {
      node_of[static_cast<std::size_t>(members[j])] = node;
      pos_of[static_cast<std::size_t>(members[j])] = static_cast<int>(j);
    }
  // P(c) per member and P(v) per node; equal expert profiles give equal chances (cached).
  std::map<std::vector<int>, double> cache;
  const auto chance = [&](const std::vector<int>& held) {
    auto it = cache.find(held);
    if (it == cache.end()) it = cache.emplace(held, chance_token_reaches(moe, held)).first;
    return it->second;
  };
  const auto experts_of = [&](int member) {
    std::vector<int> held;
    for (int x = 0; x < per_rank; ++x) held.push_back(member * per_rank + x);
    return held;
  };
  std::vector<double> p_member(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) p_member[static_cast<std::size_t>(i)] = chance(experts_of(i));
  std::map<int, double> p_node;
  for (const auto& [node, members] : nodes) {
    std::vector<int> held;
    for (int m : members) {
      const std::vector<int> e = experts_of(m);
      held.insert(held.end(), e.begin(), e.end());
    }
    p_node[node] = chance(held);
  }
  // The RDMA target of member a in node v: v's member at a's position (modulo v's count).
  const auto rdma_target = [&](int a, int v) {
    const std::vector<int>& m = nodes.at(v);
    return m[static_cast<std::size_t>(pos_of[static_cast<std::size_t>(a)]) % m.size()];
  };
  std::vector<int> forwarded_into(static_cast<std::size_t>(p), 0);
  for (int a = 0; a < p; ++a)
    for (const auto& [v, members] : nodes)
      if (v != node_of[static_cast<std::size_t>(a)]) ++forwarded_into[rdma_target(a, v)];
  const double k = moe.top_k;
  std::vector<double> shares(static_cast<std::size_t>(p) * p, 0.0);
  for (int a = 0; a < p; ++a) {
    const int home = node_of[static_cast<std::size_t>(a)];
    for (const auto& [v, members] : nodes) {
      if (v == home) {
        const double sources = 1.0 + forwarded_into[static_cast<std::size_t>(a)];
        for (int c : members)
          if (c != a)
            shares[static_cast<std::size_t>(a) * p + c] =
                sources * p_member[static_cast<std::size_t>(c)] / k;
      } else {
        shares[static_cast<std::size_t>(a) * p + rdma_target(a, v)] += p_node.at(v) / k;
      }
    }
  }
  return shares;
}

}  // namespace csim::core
