// core/hardware/topology_cache.hpp: one Topology per distinct (ClusterSpec, LinkParams), equal to a
// fresh one, shared across threads (docs/block-eval.md, "Speed").
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "core/hardware/topology_cache.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// 4 nodes of 8 NVSwitch GPUs, 2 NICs each, a fat tree of 2 nodes per leaf: intra-node routes,
// inter-node routes through leaf and spine, every link kind but NVLink mesh.
ClusterSpec cluster() {
  ClusterSpec c;
  c.nodes = 4;
  c.gpus_per_node = 8;
  c.intra.kind = IntraNodeKind::kNvswitch;
  c.intra.pcie_gen = 4;
  c.intra.nvswitch_bytes_per_s = 300e9;
  c.nics_per_node = 2;
  c.nic_bytes_per_s = 25e9;
  c.fabric.nodes_per_leaf = 2;
  c.fabric.oversubscription = 2;
  return c;
}

std::vector<Endpoint> endpoints(const ClusterSpec& c) {
  std::vector<Endpoint> e;
  for (int g = 0; g < c.world_gpus(); ++g) e.push_back(Endpoint::gpu(g));
  for (int n = 0; n < c.nodes; ++n) e.push_back(Endpoint::host(n));
  return e;
}

// Everything a cost function reads from a Topology: its links and every route.
void require_equal(const Topology& a, const Topology& b, const ClusterSpec& c) {
  REQUIRE(a.links().size() == b.links().size());
  for (std::size_t i = 0; i < a.links().size(); ++i) {
    const Link &x = a.links()[i], &y = b.links()[i];
    REQUIRE(x.name == y.name);
    REQUIRE(x.capacity_bytes_per_s == y.capacity_bytes_per_s);
    REQUIRE(x.alpha_ns == y.alpha_ns);
    REQUIRE(x.kind == y.kind);
    REQUIRE(x.node == y.node);
  }
  for (Endpoint s : endpoints(c))
    for (Endpoint d : endpoints(c)) REQUIRE(a.route(s, d) == b.route(s, d));
  std::vector<int> all;
  for (int g = 0; g < c.world_gpus(); ++g) all.push_back(g);
  REQUIRE(a.rings(all) == b.rings(all));
}

}  // namespace

TEST_CASE("topology cache: a hit is the same object, equal to a fresh Topology") {
  const ClusterSpec c = cluster();
  const std::shared_ptr<const Topology> first = shared_topology(c);
  const std::size_t built = topologies_built();
  const std::shared_ptr<const Topology> again = shared_topology(c);
  // The key compares every member, so an equal cluster is a hit: nothing built, one object.
  CHECK(topologies_built() == built);
  CHECK(again.get() == first.get());
  // The constructor reads only (cluster, params): the cached one equals a fresh build.
  require_equal(*again, Topology(c), c);
}

TEST_CASE("topology cache: any field of the cluster or the link constants is part of the key") {
  const ClusterSpec c = cluster();
  const std::shared_ptr<const Topology> base = shared_topology(c);
  ClusterSpec slower = c;
  slower.nic_bytes_per_s = 12.5e9;  // one rate: a different Topology (NIC capacity halves)
  const std::shared_ptr<const Topology> t = shared_topology(slower);
  CHECK(t.get() != base.get());
  require_equal(*t, Topology(slower), slower);
  ClusterSpec degraded = c;
  degraded.degraded_links.push_back({1, 0, -1, 0.5});
  CHECK(shared_topology(degraded).get() != base.get());
  ClusterSpec renamed = c;
  renamed.gpu.name = "other";  // not read by the links, but part of gpu_spec(): still a new key
  CHECK(shared_topology(renamed).get() != base.get());
  ClusterSpec curve = c;
  curve.gpu.efficiency[2].max_efficiency = 0.5;  // inside an array of structs: compared too
  CHECK(shared_topology(curve).get() != base.get());
  LinkParams params;
  params.nic_alpha_ns = 1000;
  const std::shared_ptr<const Topology> p = shared_topology(c, params);
  CHECK(p.get() != base.get());
  CHECK(p->link_params().nic_alpha_ns == 1000);
}

TEST_CASE("topology cache: the least recently used entry goes past kTopologyCacheEntries") {
  ClusterSpec c = cluster();
  c.nodes = 2;
  const std::shared_ptr<const Topology> kept = shared_topology(c);
  const Topology* address = kept.get();
  for (std::size_t i = 1; i <= kTopologyCacheEntries; ++i) {
    ClusterSpec other = c;
    other.nic_bytes_per_s = 1e9 * static_cast<double>(i);
    shared_topology(other);
  }
  // Evicted from the cache (kTopologyCacheEntries newer ones), alive while held: a new one built.
  const std::size_t built = topologies_built();
  const std::shared_ptr<const Topology> rebuilt = shared_topology(c);
  CHECK(topologies_built() == built + 1);
  CHECK(rebuilt.get() != address);
  require_equal(*rebuilt, *kept, c);
}

TEST_CASE("topology cache: threads share one Topology and read its lazy routes together") {
  ClusterSpec c = cluster();
  c.nodes = 3;  // a cluster no other test asked for: the threads race to build it
  std::vector<std::shared_ptr<const Topology>> got(4);
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < got.size(); ++i)
    pool.emplace_back([&, i] {
      got[i] = shared_topology(c);
      // Inter-node routes are built on first use under the Topology's mutex.
      for (Endpoint s : endpoints(c))
        for (Endpoint d : endpoints(c)) (void)got[i]->route(s, d);
    });
  for (std::thread& t : pool) t.join();
  for (const auto& t : got) CHECK(t.get() == got[0].get());
  require_equal(*got[0], Topology(c), c);
}
