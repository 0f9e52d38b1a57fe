// NCCL's PAT all-gather and reduce-scatter (docs/cost-model.md, "PAT"); expected values derived
// in comments.
#include <catch2/catch.hpp>

#include "core/cost/collective_cost.hpp"
#include "core/cost/nccl_channels.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/scenario/parse_nccl.hpp"
#include "tests/collective_test_support.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::iota;
using csim::test::simulate;

namespace {

const CommParams kDefaults{};

double alpha(const Topology& t, int a, int b) {
  return static_cast<double>(t.route_alpha_ns(Endpoint::gpu(a), Endpoint::gpu(b)));
}

}  // namespace

TEST_CASE("PAT all-gather and reduce-scatter on 8 nodes of one H100", "[collective][pat]") {
  const Topology t(catalog_cluster("H100-SXM5-80GB", 8, 1));
  const double S = 1048576.0;  // 1 MiB
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
    const TransferPlan n = plan_collective(t, kDefaults, k, CollectiveAlgo::kPat, iota(8), -1, S);
    REQUIRE(n.algo == CollectiveAlgo::kPat);
    CHECK(n.proto == NcclProto::kSimple);
    // Steps d = 1, 2, 4: 8 flows each, of 1, 2 and min(4, 4) = 4 shares of S/8 (7 in all).
    CHECK(n.flows.size() == 24);
    double total = 0;
    for (const FlowSpec& f : n.flows) total += f.bytes;
    CHECK(total == Approx(8 * 7 * S / 8));
    // Latency = Simple base (4 + 4.8) + 3 steps x the NIC route alpha (19.6 us) x 0.8 + 8 x 2.8
    // us = 8.8 + 47.04 + 22.4 = 78.24 us (NCCL's model: 8 + 3 x 14 / 3.5 + 8 x 2.8 = 42.4 us).
    CHECK(alpha(t, 0, 1) == Approx(19600));
    CHECK(n.latency_ns == Approx(78240).margin(2));
    // Bandwidth: every rank sends and receives 7/8 S through its NIC (48.5 GB/s), and the flows
    // are capped at 0.75 x the ring's channel cap; the slower of the two.
    const NcclRingGraph g = nccl_ring_graph(t, iota(8));
    const int c = nccl_channels_for(g, CollectiveAlgo::kRing, NcclProto::kSimple, 8, S);
    const double cap = 0.75 * nccl_busbw_cap(g, NcclArch::kHopper, NcclProto::kSimple, false, c);
    const double bw_s = std::max(7.0 / 8 * S / 48.5e9, 7.0 / 8 * S / cap);
    CHECK(static_cast<double>(n.predicted_ns - n.latency_ns) * 1e-9 == Approx(bw_s).epsilon(1e-3));
    CHECK(std::abs(simulate(t, n) - n.predicted_ns) <= 2);
    // Automatic: at 1 MiB PAT's 3 steps beat the ring's 7 NIC crossings (NCCL's model also
    // picks PAT there, bench_nccl_tuning's third table).
    const TransferPlan a = plan_collective(t, kDefaults, k, CollectiveAlgo::kAuto, iota(8), -1, S);
    CHECK(a.algo == CollectiveAlgo::kPat);
  }
}

TEST_CASE("PAT with a non-power-of-two group: the last step sends p - d shares",
          "[collective][pat]") {
  // 6 nodes of one GPU: d = 1, 2, 4 with min(d, 6 - d) = 1, 2, 2 shares of S/6: 5 = p - 1.
  const Topology t(catalog_cluster("H100-SXM5-80GB", 6, 1));
  const double S = 6e6;
  const TransferPlan n = plan_collective(t, kDefaults, CollectiveKind::kAllGather,
                                         CollectiveAlgo::kPat, iota(6), -1, S);
  REQUIRE(n.algo == CollectiveAlgo::kPat);
  REQUIRE(n.flows.size() == 18);
  CHECK(n.flows[0].bytes == Approx(1e6));
  CHECK(n.flows[6].bytes == Approx(2e6));
  CHECK(n.flows[12].bytes == Approx(2e6));
  // 8.8 + 3 x 19.6 x 0.8 + 6 x 2.8 = 72.64 us
  CHECK(n.latency_ns == Approx(72640).margin(2));
}

TEST_CASE("PAT gates: one GPU per node", "[collective][pat][gates]") {
  const double S = 1048576.0;
  // 8-GPU nodes: a group with two GPUs on one node cannot run PAT (ncclPatEnable: nNodes ==
  // nRanks); forced, the automatic choice runs.
  const Topology t(catalog_cluster("H100-SXM5-80GB", 2, 8));
  CHECK(plan_collective(t, kDefaults, CollectiveKind::kAllGather, CollectiveAlgo::kPat, iota(16),
                        -1, S)
            .algo != CollectiveAlgo::kPat);
  // A group of one GPU on each node (a data-parallel group across tensor-parallel nodes) is a
  // communicator with nNodes == nRanks: NCCL enables PAT for it, and so do we.
  CHECK(
      plan_collective(t, kDefaults, CollectiveKind::kAllGather, CollectiveAlgo::kPat, {0, 8}, -1, S)
          .algo == CollectiveAlgo::kPat);
  // The scenario's gate forbids forcing it on nodes of more than one GPU, or on one node.
  CHECK(!parse::nccl_algo_gate(CollectiveAlgo::kPat, catalog_cluster("H100-SXM5-80GB", 2, 8))
             .empty());
  CHECK(!parse::nccl_algo_gate(CollectiveAlgo::kPat, catalog_cluster("H100-SXM5-80GB", 1, 1))
             .empty());
  CHECK(
      parse::nccl_algo_gate(CollectiveAlgo::kPat, catalog_cluster("H100-SXM5-80GB", 8, 1)).empty());
}
