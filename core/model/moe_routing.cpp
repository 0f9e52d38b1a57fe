// Routing imbalance samples (core/model/moe_routing.hpp; docs/transformer.md, "Routing
// imbalance").
#include "core/model/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/model/moe_layers.hpp"
#include "core/model/mtp_layers.hpp"

namespace csim::core {

namespace {

// splitmix64 (Steele, Lea, Flood 2014): a 64-bit generator whose every output is a bijective mix
// of a counter, so a (seed, block, micro) key gives its own reproducible stream.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1): the top 53 bits, offset by half a step so that 0 never comes out.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  // Standard normal (Box-Muller; one of the pair).
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  // Gamma(a, 1) (Marsaglia and Tsang 2000, "A simple method for generating gamma variables";
  // a < 1 through Gamma(a + 1) U^(1/a)).
  double gamma(double a) {
    if (a < 1.0) return gamma(a + 1.0) * std::pow(uniform(), 1.0 / a);
    const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x = 0, v = 0;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0.0);
      v = v * v * v;
      const double u = uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }

 private:
  std::uint64_t state_;
};

std::uint64_t key(std::uint64_t seed, int block, std::int64_t micro) {
  SplitMix64 g(seed);
  std::uint64_t k = g.next() ^ (static_cast<std::uint64_t>(block) * 0x9E3779B97F4A7C15ULL);
  k = SplitMix64(k).next() ^ (static_cast<std::uint64_t>(micro) * 0xC2B2AE3D27D4EB4FULL);
  return SplitMix64(k).next();
}

void normalise(std::vector<double>& v) {
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  for (double& x : v) x /= sum;
}

}  // namespace

std::vector<double> expert_shares(const MoeConfig& m, int block, std::int64_t micro) {
  const auto e = static_cast<std::size_t>(m.experts);
  std::vector<double> s(e, 1.0 / static_cast<double>(e));
  const MoeRouting& r = m.routing;
  switch (r.kind) {
    case RoutingKind::kBalanced:
      return s;
    case RoutingKind::kHistogram:
      s = r.tokens;
      normalise(s);
      return s;
    case RoutingKind::kZipf: {
      SplitMix64 g(key(r.seed, block, micro));
      std::vector<std::size_t> order(e);
      std::iota(order.begin(), order.end(), std::size_t{0});
      for (std::size_t i = e; i-- > 1;) {  // Fisher-Yates
        const std::size_t j = static_cast<std::size_t>(g.next() % (i + 1));
        std::swap(order[i], order[j]);
      }
      for (std::size_t i = 0; i < e; ++i)
        s[order[i]] = 1.0 / std::pow(static_cast<double>(i + 1), r.skew);
      normalise(s);
      return s;
    }
    case RoutingKind::kDirichlet: {
      SplitMix64 g(key(r.seed, block, micro));
      for (double& x : s) x = g.gamma(r.concentration);
      normalise(s);
      return s;
    }
  }
  return s;
}

std::vector<double> kept_shares(const MoeConfig& m, const std::vector<double>& shares) {
  if (m.capacity_factor <= 0) return shares;
  const double cap = m.capacity_factor / static_cast<double>(shares.size());
  std::vector<double> out(shares.size());
  for (std::size_t i = 0; i < shares.size(); ++i)
    out[i] = m.pad_to_capacity ? cap : std::min(shares[i], cap);
  return out;
}

double dropped_share(const MoeConfig& m, const std::vector<double>& shares) {
  if (m.capacity_factor <= 0) return 0;
  const double cap = m.capacity_factor / static_cast<double>(shares.size());
  double d = 0;
  for (double x : shares) d += std::max(0.0, x - cap);
  return d;
}

bool uniform_expert_load(const MoeConfig& m) {
  return m.routing.kind == RoutingKind::kBalanced &&
         (m.capacity_factor <= 0 || (m.capacity_factor >= 1 && !m.pad_to_capacity));
}

std::vector<double> ep_rank_loads(const std::vector<double>& shares, int ep) {
  const std::size_t per = shares.size() / static_cast<std::size_t>(ep);
  std::vector<double> out(static_cast<std::size_t>(ep), 0.0);
  for (std::size_t i = 0; i < shares.size(); ++i) out[i / per] += shares[i];
  for (double& x : out) x *= ep;
  return out;
}

RoutingStats routing_stats(const TransformerConfig& c, int ep, std::int64_t micro_batches) {
  RoutingStats st;
  st.busiest_rank_count.assign(static_cast<std::size_t>(ep), 0);
  double expert_sum = 0, rank_sum = 0;
  st.worst_expert_max_over_mean = st.worst_rank_max_over_mean = 0;
  // The main model's blocks, then the multi-token-prediction depths' (numbered after them and
  // shaped as the last block: core/model/mtp_layers.hpp).
  for (int b = 0; b < c.layers + c.mtp_layers; ++b) {
    if (!block_is_moe(c, b < c.layers ? b : mtp_block_like(c))) continue;
    for (std::int64_t mu = 0; mu < micro_batches; ++mu) {
      const std::vector<double> s = expert_shares(c.moe, b, mu);
      const std::vector<double> l = ep_rank_loads(kept_shares(c.moe, s), ep);
      const double dropped = dropped_share(c.moe, s);
      st.dropped += dropped;
      st.worst_dropped = std::max(st.worst_dropped, dropped);
      const double e = *std::max_element(s.begin(), s.end()) * static_cast<double>(s.size());
      const auto busiest = std::max_element(l.begin(), l.end());
      expert_sum += e;
      rank_sum += *busiest;
      st.worst_expert_max_over_mean = std::max(st.worst_expert_max_over_mean, e);
      st.worst_rank_max_over_mean = std::max(st.worst_rank_max_over_mean, *busiest);
      ++st.busiest_rank_count[static_cast<std::size_t>(busiest - l.begin())];
      ++st.samples;
    }
  }
  if (st.samples == 0) return RoutingStats{};
  st.expert_max_over_mean = expert_sum / st.samples;
  st.rank_max_over_mean = rank_sum / st.samples;
  st.dropped /= st.samples;
  return st;
}

}  // namespace csim::core
