// NVLS all-gather / reduce-scatter and the network hops' protocol factors (docs/cost-model.md,
// "NVLS", "Network hops"); expected values derived in comments.
#include <catch2/catch.hpp>

#include "core/cost/collective_cost.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "tests/collective_test_support.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::iota;
using csim::test::simulate;

namespace {

double alpha(const Topology& t, int a, int b) {
  return static_cast<double>(t.route_alpha_ns(Endpoint::gpu(a), Endpoint::gpu(b)));
}

}  // namespace

TEST_CASE("NVLS all-gather and reduce-scatter on one H100 node", "[collective][nvls]") {
  // 8 H100 on NVSwitch: the busy port direction moves 7/8 x S at nvls_efficiency 0.758 of the
  // port (450 GB/s x 0.80 = 360 GB/s): 1 GiB: 939,524,096 / 0.758 / 360e9 = 3.4430 ms. Latency =
  // base 4 + NVLS 25 us + one switch route alpha.
  const Topology t(catalog_cluster("H100-SXM5-80GB", 1, 8));
  const double S = 1073741824.0;
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
    const TransferPlan n =
        plan_collective(t, CommParams{}, k, CollectiveAlgo::kNvls, iota(8), -1, S);
    REQUIRE(n.algo == CollectiveAlgo::kNvls);
    CHECK(n.proto == NcclProto::kSimple);
    CHECK(n.flows.size() == 8);
    CHECK(n.latency_ns == Approx(29000 + alpha(t, 0, 1)).margin(1));
    CHECK(n.predicted_ns - n.latency_ns == Approx(7.0 / 8 * S / 0.758 / 360e9 * 1e9).epsilon(1e-4));
    CHECK(std::abs(simulate(t, n) - n.predicted_ns) <= 2);
    // Automatic: the ring's 24 channels x 15 GB/s = 360 GB/s busbw beat NVLS's 272.9 (and its
    // 25 us), as in NCCL's own model (bench_nccl_tuning: Ring/Simple at 1 GiB).
    const TransferPlan a =
        plan_collective(t, CommParams{}, k, CollectiveAlgo::kAuto, iota(8), -1, S);
    CHECK(a.algo == CollectiveAlgo::kRing);
    CHECK(a.predicted_ns < n.predicted_ns);
  }
  // No NVLS on A100 (sm_80): the forced algorithm falls back to the automatic choice (the ring).
  const Topology a100(catalog_cluster("A100-SXM4-80GB", 1, 8));
  CHECK(plan_collective(a100, CommParams{}, CollectiveKind::kAllGather, CollectiveAlgo::kNvls,
                        iota(8), -1, S)
            .algo == CollectiveAlgo::kRing);
}

TEST_CASE("network hops: NCCL's NET latency ratios per algorithm and protocol",
          "[collective][protocols]") {
  // 2 DGX H100 nodes, 16 ranks, an 8-byte ring all-reduce forced to LL128, rails: 8 rings, each
  // crossing the node boundary twice (2 x 19.6 us) and 14 NVSwitch routes. Latency = base 4 + 6.4
  // + 2(p-1)/p x (14 x alpha_nvs x 1.9/0.6 + 2 x 19.6 us x 4.0/5.0).
  const Topology t(catalog_cluster("H100-SXM5-80GB", 2, 8));
  CommParams c;
  c.proto = NcclProto::kLL128;
  const TransferPlan r =
      plan_collective(t, c, CollectiveKind::kAllReduce, CollectiveAlgo::kRing, iota(16), -1, 8);
  const double f = 2.0 * 15 / 16;
  const double expect = 10400 + f * (14 * alpha(t, 0, 1) * 1.9 / 0.6 + 2 * 19600 * 0.8);
  CHECK(r.latency_ns == Approx(expect).margin(2));
  // The tree keeps the fitted LL round trip (nccl_2x8h20_ib_latency, 47.4 us: network factor 1).
  c.proto = NcclProto::kLL;
  const TransferPlan tr =
      plan_collective(t, c, CollectiveKind::kAllReduce, CollectiveAlgo::kTree, iota(16), -1, 8);
  CHECK(tr.predicted_ns == Approx(47400).margin(100));
}
