// docs/block-eval.md, "Speed": the Topology cache.
#include "core/hardware/topology_cache.hpp"

#include <algorithm>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace csim::core {

namespace {

// [SECTION] The key ------------------------------------------------------------------------------

// Every member of the cluster's structs, by structured bindings: a member added to one of them
// no longer compiles here until the key compares it too, so the key stays the whole description.
auto fields(const EfficiencyCurve& x) {
  const auto& [max_efficiency, half_flops, source] = x;
  return std::tie(max_efficiency, half_flops, source);
}
auto fields(const GpuSpec& x) {
  const auto& [name, memory, fp32, tf32, fp16, bf16, fp8, mem_bw, sms, nccl_sms, hbm_sharing, cc,
               tile, grouped, overhead, efficiency, fp8_gemm, mem_bw_efficiency, clock, source] = x;
  return std::tie(name, memory, fp32, tf32, fp16, bf16, fp8, mem_bw, sms, nccl_sms, hbm_sharing, cc,
                  tile, grouped, overhead, efficiency, fp8_gemm, mem_bw_efficiency, clock, source);
}
auto fields(const MemoryReserve& x) {
  const auto& [context, nccl, workspace] = x;
  return std::tie(context, nccl, workspace);
}
auto fields(const NvlinkPair& x) {
  const auto& [a, b, links] = x;
  return std::tie(a, b, links);
}
auto fields(const IntraNodeSpec& x) {
  const auto& [kind, gen, lanes, bridge, pairs, nvlink, nvswitch] = x;
  return std::tie(kind, gen, lanes, bridge, pairs, nvlink, nvswitch);
}
auto fields(const FabricSpec& x) {
  const auto& [per_leaf, oversubscription, rail, sharp] = x;
  return std::tie(per_leaf, oversubscription, rail, sharp);
}
auto fields(const NicSpec& x) {
  const auto& [stack, latency, efficiency] = x;
  return std::tie(stack, latency, efficiency);
}
auto fields(const Straggler& x) {
  const auto& [gpu, slowdown] = x;
  return std::tie(gpu, slowdown);
}
auto fields(const LinkDegradation& x) {
  const auto& [node, nic, gpu, factor] = x;
  return std::tie(node, nic, gpu, factor);
}
auto fields(const ClusterSpec& x) {
  const auto& [nodes, per_node, gpu, reserve, intra, nics, nic_rate, nic, power_limit, p2p, fabric,
               stragglers, degraded] = x;
  return std::tie(nodes, per_node, gpu, reserve, intra, nics, nic_rate, nic, power_limit, p2p,
                  fabric, stragglers, degraded);
}

template <typename T>
bool same(const T& a, const T& b);

template <typename T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same(a[i], b[i])) return false;
  return true;
}

template <typename T, std::size_t N>
bool same(const T (&a)[N], const T (&b)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (!same(a[i], b[i])) return false;
  return true;
}

template <typename... A, std::size_t... I>
bool same_fields(const std::tuple<A...>& a, const std::tuple<A...>& b, std::index_sequence<I...>) {
  return (same(std::get<I>(a), std::get<I>(b)) && ...);
}

// Structs member by member, everything else (numbers, enums, strings) by ==; doubles exactly (a
// NaN never matches: a miss, which builds).
template <typename T>
bool same(const T& a, const T& b) {
  if constexpr (requires { fields(a); })
    return same_fields(fields(a), fields(b),
                       std::make_index_sequence<std::tuple_size_v<decltype(fields(a))>>{});
  else
    return a == b;
}

// [SECTION] The cache ----------------------------------------------------------------------------

struct Entry {
  ClusterSpec cluster;
  LinkParams params;
  std::shared_ptr<const Topology> topology;
};

std::mutex cache_mutex;
std::vector<Entry> cache;  // most recently used first
std::size_t built = 0;

// The cached entry for (cluster, params), moved to the front; null when none.
std::shared_ptr<const Topology> find(const ClusterSpec& cluster, const LinkParams& params) {
  for (std::size_t i = 0; i < cache.size(); ++i) {
    if (cache[i].params == params && same(cache[i].cluster, cluster)) {
      std::rotate(cache.begin(), cache.begin() + static_cast<std::ptrdiff_t>(i),
                  cache.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return cache.front().topology;
    }
  }
  return nullptr;
}

}  // namespace

std::shared_ptr<const Topology> shared_topology(const ClusterSpec& cluster,
                                                const LinkParams& params) {
  {
    const std::lock_guard<std::mutex> lock(cache_mutex);
    if (std::shared_ptr<const Topology> t = find(cluster, params)) return t;
  }
  // Built outside the lock: other clusters' look-ups need not wait for it.
  auto t = std::make_shared<const Topology>(cluster, params);
  const std::lock_guard<std::mutex> lock(cache_mutex);
  ++built;
  // Another thread may have built the same one meanwhile: keep the first, so that every holder
  // shares one object.
  if (std::shared_ptr<const Topology> first = find(cluster, params)) return first;
  cache.insert(cache.begin(), Entry{cluster, params, t});
  if (cache.size() > kTopologyCacheEntries) cache.pop_back();
  return t;
}

std::size_t topologies_built() {
  const std::lock_guard<std::mutex> lock(cache_mutex);
  return built;
}

}  // namespace csim::core
