// NCCL's NVLSTree all-reduce (docs/cost-model.md, "NVLSTree"); expected values derived in
// comments.
#include <catch2/catch.hpp>

#include "core/cost/collective_cost.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/scenario/parse_nccl.hpp"
#include "tests/collective_test_support.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::iota;
using csim::test::simulate;

namespace {

const CommParams kDefaults{};

TransferPlan all_reduce(const Topology& t, CollectiveAlgo a, int p, double S,
                        const CommParams& c = kDefaults) {
  return plan_collective(t, c, CollectiveKind::kAllReduce, a, iota(p), -1, S);
}

}  // namespace

TEST_CASE("NVLSTree all-reduce on 2 DGX H100 nodes", "[collective][nvlstree]") {
  const Topology t(catalog_cluster("H100-SXM5-80GB", 2, 8));
  const double S = 1073741824.0;  // 1 GiB
  const TransferPlan n = all_reduce(t, CollectiveAlgo::kNvlsTree, 16, S);
  REQUIRE(n.algo == CollectiveAlgo::kNvlsTree);
  CHECK(n.proto == NcclProto::kSimple);
  // Flows: 8 NVLS flows per node (16), and per rail (8) a double binary tree over the 2 nodes:
  // one edge per tree, S/16 up and down each (4 flows): 16 + 32 = 48.
  CHECK(n.flows.size() == 48);
  // Latency = base 4 + NVLS 25 + one NVSwitch route 0.7 + the trees' round trip over one network
  // hop each way, 2 x 19.6 us x nvlstree_net_factor (17.8 / 39.2): 29.7 + 17.8 = 47.5 us, the
  // measured 8-byte NVLSTree all-reduce of nccl_2x8h20_ib_latency (its fit).
  CHECK(n.latency_ns == Approx(47500).margin(2));
  // Bandwidth: NCCL's cap, 8 NVLS channels x perChMaxNVLSTreeBw (Hopper, 2 nodes: 57.7 GB/s) =
  // 461.6 GB/s busbw, i.e. 2(p-1)/p x S / 461.6e9 = 1.875 x S / 461.6e9 = 4.3616 ms; below it the
  // NVLS ports (S / 0.758 / 360e9 = 3.935 ms) and the NICs (S/8 each way / 48.5e9 = 2.77 ms).
  const double bw_s = 1.875 * S / 461.6e9;
  CHECK(static_cast<double>(n.predicted_ns - n.latency_ns) * 1e-9 == Approx(bw_s).epsilon(1e-4));
  CHECK(std::abs(simulate(t, n) - n.predicted_ns) <= 2);
  // Without the channel model the NVLS ports limit: S / 0.758 / 360e9.
  CommParams links_only;
  links_only.channel_model = false;
  const TransferPlan l = all_reduce(t, CollectiveAlgo::kNvlsTree, 16, S, links_only);
  CHECK(static_cast<double>(l.predicted_ns - l.latency_ns) * 1e-9 ==
        Approx(S / 0.758 / 360e9).epsilon(1e-4));
  CHECK(std::abs(simulate(t, l) - l.predicted_ns) <= 2);
  // Automatic: at 1 GiB NVLSTree's 4.41 ms beats the hierarchical plan (forced: 5.39 ms, 373 GB/s
  // busbw; `simrun collective --algo hierarchical`), as NCCL's model picks NVLSTree there; at 8 B
  // the tree (47.4 us: base 4 + 2 x (2.1 + 19.6) us, the H20 case of test_collective_cost.cpp)
  // is 0.1 us ahead of NVLSTree (47.5 us).
  const TransferPlan a = all_reduce(t, CollectiveAlgo::kAuto, 16, S);
  CHECK(a.algo == CollectiveAlgo::kNvlsTree);
  CHECK(a.predicted_ns == n.predicted_ns);
  CHECK(all_reduce(t, CollectiveAlgo::kAuto, 16, 8).algo == CollectiveAlgo::kTree);
}

TEST_CASE("NVLSTree all-reduce on 8 DGX H100 nodes", "[collective][nvlstree]") {
  const Topology t(catalog_cluster("H100-SXM5-80GB", 8, 8));
  const double S = 1073741824.0;
  const TransferPlan n = all_reduce(t, CollectiveAlgo::kNvlsTree, 64, S);
  REQUIRE(n.algo == CollectiveAlgo::kNvlsTree);
  // Trees over 8 nodes (heap order): the deepest leaf (index 7) is 3 edges from the root, 6
  // network hops round trip: 29.7 + 6 x 19.6 x 17.8 / 39.2 = 29.7 + 53.4 = 83.1 us.
  CHECK(n.latency_ns == Approx(83100).margin(2));
  // NCCL's cap on more than 2 nodes: 8 x 45.5 = 364 GB/s busbw: 2 x 63/64 x S / 364e9 = 5.808 ms;
  // the busiest NIC (interior in one tree: S/16 to its parent and to each of 2 children; a leaf
  // in the other: S/16 up) sends 4 x S/16 = S/4 at 48.5 GB/s = 5.535 ms, below the cap.
  const double bw_s = 2.0 * 63 / 64 * S / 364e9;
  CHECK(static_cast<double>(n.predicted_ns - n.latency_ns) * 1e-9 == Approx(bw_s).epsilon(1e-4));
  CHECK(std::abs(simulate(t, n) - n.predicted_ns) <= 2);
}

TEST_CASE("NVLSTree gates: NVLS hardware, two or more nodes", "[collective][nvlstree][gates]") {
  const double S = 1073741824.0;
  // DGX A100 (sm_80): no NVLS, so no NVLSTree; forced, the automatic choice runs.
  const Topology a100(catalog_cluster("A100-SXM4-80GB", 2, 8));
  CHECK(all_reduce(a100, CollectiveAlgo::kNvlsTree, 16, S).algo != CollectiveAlgo::kNvlsTree);
  for (double s : {8.0, 1e6, 1e9})
    CHECK(all_reduce(a100, CollectiveAlgo::kAuto, 16, s).algo != CollectiveAlgo::kNvlsTree);
  // One H100 node: tuning.cc disables NVLSTree; a group inside one node of a 2-node cluster too.
  const Topology h1(catalog_cluster("H100-SXM5-80GB", 1, 8));
  CHECK(all_reduce(h1, CollectiveAlgo::kNvlsTree, 8, S).algo != CollectiveAlgo::kNvlsTree);
  const Topology h2(catalog_cluster("H100-SXM5-80GB", 2, 8));
  CHECK(all_reduce(h2, CollectiveAlgo::kNvlsTree, 8, S).algo != CollectiveAlgo::kNvlsTree);
  // The scenario's gate (core/scenario/parse_nccl.cpp): forcing it where it cannot run is exit 2.
  CHECK(!parse::nccl_algo_gate(CollectiveAlgo::kNvlsTree, catalog_cluster("A100-SXM4-80GB", 2, 8))
             .empty());
  CHECK(!parse::nccl_algo_gate(CollectiveAlgo::kNvlsTree, catalog_cluster("H100-SXM5-80GB", 1, 8))
             .empty());
  CHECK(parse::nccl_algo_gate(CollectiveAlgo::kNvlsTree, catalog_cluster("H100-SXM5-80GB", 2, 8))
            .empty());
}
