// Collective and copy plans (docs/cost-model.md, "Communication" and "Calibration"); expected
// values derived in comments. Calibration cases: calibration/published/published-measurements.json
// (the NIC-stack cases: nic-stack-measurements.json).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/cost/collective_cost.hpp"
#include "core/engine/flow_network.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/hardware/nic_stack.hpp"
#include "tests/collective_test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

ClusterSpec nvswitch_node(double port_bytes_per_s, int pcie_gen) {
  ClusterSpec c;
  c.gpus_per_node = 8;
  c.intra.kind = IntraNodeKind::kNvswitch;
  c.intra.nvswitch_bytes_per_s = port_bytes_per_s;
  c.intra.pcie_gen = pcie_gen;
  c.gpu.mem_bw_bytes_per_s = 1e12;
  c.gpu.mem_bw_efficiency = 0.8;
  c.gpu.kernel_overhead_ns = 2000;
  return c;
}

ClusterSpec pcie_node(int gpus, int gen) {
  ClusterSpec c;
  c.gpus_per_node = gpus;
  c.intra.kind = IntraNodeKind::kPcie;
  c.intra.pcie_gen = gen;
  return c;
}

using csim::test::iota;
using csim::test::simulate;  // tests/collective_test_support.hpp

double busbw_gb_per_s(CollectiveKind kind, int p, double bytes, TimeNs t) {
  return bytes / (static_cast<double>(t) * 1e-9) * busbw_factor(kind, p) / 1e9;
}

// The algorithms' closed forms below are written for a protocol-neutral model: Simple's full
// bandwidth with LL's fitted latencies (no protocol extras), links only (no channel caps);
// protocols and channels (tests/test_nccl_channels.cpp) have their own tests.
CommParams neutral_params() {
  CommParams c;
  c.channel_model = false;
  c.proto = NcclProto::kSimple;
  c.simple_base_extra_us = 0;
  c.simple_hop_factor = 1;
  c.net_ring.simple = c.net_tree.simple = 1;  // network hops: the route alpha alone
  c.collnet_net_factor = 1;
  return c;
}
const CommParams kParams = neutral_params();
const CommParams kDefaults;  // what the simulator uses
CommParams protocols_only() {
  CommParams c;
  c.channel_model = false;
  return c;
}
const CommParams kProtocolsOnly = protocols_only();  // the protocols' closed forms, no channels

}  // namespace

TEST_CASE("busbw factors follow nccl-tests", "[collective]") {
  CHECK(busbw_factor(CollectiveKind::kAllReduce, 8) == Approx(1.75));   // 2(p-1)/p
  CHECK(busbw_factor(CollectiveKind::kAllGather, 8) == Approx(0.875));  // (p-1)/p
  CHECK(busbw_factor(CollectiveKind::kReduceScatter, 4) == Approx(0.75));
  CHECK(busbw_factor(CollectiveKind::kBroadcast, 8) == Approx(1.0));
  CHECK(busbw_factor(CollectiveKind::kSendRecv, 8) == Approx(1.0));
}

TEST_CASE("ring all-reduce closed form on NVSwitch", "[collective]") {
  const Topology t(nvswitch_node(300e9, 4));
  const auto plan = plan_collective(t, kParams, CollectiveKind::kAllReduce, CollectiveAlgo::kRing,
                                    iota(8), -1, 1e9);
  // p = 8 flows of 2(p-1)/p * S = 1.75e9 bytes; B = 300e9 * 0.8 = 240e9
  REQUIRE(plan.flows.size() == 8);
  CHECK(plan.flows[0].bytes == Approx(1.75e9));
  // latency = base + 2(p-1) * alpha = 4,000 + 14 * 700 = 13,800 ns
  CHECK(plan.latency_ns == 13800);
  // ring all-reduce: 2(p-1)/p * S / B + 2(p-1) * alpha = 7,291,666.67 + 13,800 = 7,305,466.67 ns
  CHECK(plan.predicted_ns == 7305467);
  // the flow network gives the same: no two ring flows share a link
  CHECK(std::abs(simulate(t, plan) - plan.predicted_ns) <= 1);
}

TEST_CASE("tree all-reduce: double binary tree", "[collective]") {
  const Topology t(nvswitch_node(300e9, 4));
  const auto plan = plan_collective(t, kParams, CollectiveKind::kAllReduce, CollectiveAlgo::kTree,
                                    iota(8), -1, 1e9);
  CHECK(plan.algo == CollectiveAlgo::kTree);
  // two trees x 7 edges x (up + down) = 28 flows of S/2
  REQUIRE(plan.flows.size() == 28);
  CHECK(plan.flows[0].bytes == Approx(5e8));
  // depth floor(log2 8) = 3: latency = base + 2 * 3 * 0.7 us = 4,000 + 4,200 = 8,200 ns
  CHECK(plan.latency_ns == 8200);
  // bandwidth: a rank interior in one tree receives 2 * S/2 from its children + S/2 from its parent
  // there + S/2 from its parent in the other tree = 2S on its switch down link:
  // 2e9 / 240e9 = 8,333,333.3 ns -> predicted 8,341,533 ns (slower than the ring's 7.31 ms)
  CHECK(plan.predicted_ns == 8341533);
}

TEST_CASE("auto: tree for small messages, ring for large", "[collective]") {
  const Topology t(nvswitch_node(300e9, 4));
  // 8 B: tree 8,200 ns (+ negligible bandwidth) vs ring 13,800 ns -> tree
  const auto small = plan_collective(t, kParams, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto,
                                     iota(8), -1, 8);
  CHECK(small.algo == CollectiveAlgo::kTree);
  CHECK(small.predicted_ns == 8200);
  // 1 GB: ring 7.31 ms vs tree 8.34 ms -> ring
  const auto large = plan_collective(t, kParams, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto,
                                     iota(8), -1, 1e9);
  CHECK(large.algo == CollectiveAlgo::kRing);
}

TEST_CASE("ring all-reduce on a DGX-1 runs over 6 NVLink rings", "[collective]") {
  ClusterSpec c = pcie_node(8, 3);
  c.intra.kind = IntraNodeKind::kNvlinkMesh;
  c.intra.nvlink_bytes_per_s_per_link = 25e9;
  c.intra.nvlink_pairs = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1},
                          {1, 5, 2}, {2, 3, 2}, {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1},
                          {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  const Topology t(c);
  const auto plan = plan_collective(t, kParams, CollectiveKind::kAllReduce, CollectiveAlgo::kRing,
                                    iota(8), -1, 1e9);
  // 6 rings x 8 edges; each flow 2(p-1)/p * S / 6 = 1.75e9 / 6 bytes
  REQUIRE(plan.flows.size() == 48);
  CHECK(plan.flows[0].bytes == Approx(1.75e9 / 6));
  // each double link (40 GB/s) carries two rings, each single link (20 GB/s) one:
  // 2 * 1.75e9 / 6 / 40e9 = 1.75e9 / 6 / 20e9 = 14,583,333.3 ns; latency 4,000 + 14 * 700 = 13,800
  // -> 14,597,133 ns, busbw = 1.75e9 / 14.597 ms = 119.9 GB/s (6 links x 20 GB/s)
  CHECK(plan.predicted_ns == 14597133);
  CHECK(std::abs(simulate(t, plan) - plan.predicted_ns) <= 1);
}

TEST_CASE("single-rank group: base latency only", "[collective]") {
  const Topology t(nvswitch_node(300e9, 4));
  const auto plan =
      plan_collective(t, kParams, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, {3}, -1, 1e9);
  CHECK(plan.flows.empty());
  CHECK(plan.latency_ns == 4000);
  CHECK(plan.predicted_ns == 4000);
}

TEST_CASE("broadcast and reduce: pipelined chain along the ring", "[collective]") {
  const Topology t(pcie_node(4, 3));
  // broadcast from 0: chain 0 -> 1 -> 2 -> 3, each flow S = 1e8
  const auto b = plan_collective(t, kParams, CollectiveKind::kBroadcast, CollectiveAlgo::kAuto,
                                 iota(4), 0, 1e8);
  REQUIRE(b.flows.size() == 3);
  CHECK(b.flows[0].src.index == 0);
  CHECK(b.flows[2].dst.index == 3);
  // latency = base + (p-1) * alpha = 4,000 + 3 * 1,100 = 7,300 ns. All three flows cross the host
  // bridge (up and down): 3 * 1e8 / 12e9 = 25 ms -> 25,007,300 ns
  CHECK(b.latency_ns == 7300);
  CHECK(b.predicted_ns == 25007300);
  // max-min in the flow network: each flow gets 12e9 / 3 on the bridge -> the same 25 ms
  CHECK(std::abs(simulate(t, b) - b.predicted_ns) <= 1);
  // reduce to 2: chain 3 -> 0 -> 1 -> 2 ends at the root
  const auto r =
      plan_collective(t, kParams, CollectiveKind::kReduce, CollectiveAlgo::kAuto, iota(4), 2, 1e8);
  REQUIRE(r.flows.size() == 3);
  CHECK(r.flows[0].src.index == 3);
  CHECK(r.flows[2].dst.index == 2);
}

TEST_CASE("gather and scatter: root <-> each rank, S/p each", "[collective]") {
  const Topology t(pcie_node(4, 3));
  const auto g =
      plan_collective(t, kParams, CollectiveKind::kGather, CollectiveAlgo::kAuto, iota(4), 0, 4e6);
  // 3 flows of 1e6 into GPU 0; latency = one PCIe route's alpha 1,100 ns (copies, no NCCL launch);
  // bridge carries 3e6 / 12e9 = 250 us -> 251,100 ns
  REQUIRE(g.flows.size() == 3);
  for (const auto& f : g.flows) CHECK(f.dst.index == 0);
  CHECK(g.latency_ns == 1100);
  CHECK(g.predicted_ns == 251100);
  const auto s =
      plan_collective(t, kParams, CollectiveKind::kScatter, CollectiveAlgo::kAuto, iota(4), 1, 4e6);
  REQUIRE(s.flows.size() == 3);
  for (const auto& f : s.flows) CHECK(f.src.index == 1);
}

TEST_CASE("reduce-scatter and all-gather: ring with (p-1)/p * S per edge", "[collective]") {
  const Topology t(nvswitch_node(300e9, 4));
  const auto ag = plan_collective(t, kParams, CollectiveKind::kAllGather, CollectiveAlgo::kAuto,
                                  iota(8), -1, 1e9);
  REQUIRE(ag.flows.size() == 8);
  CHECK(ag.flows[0].bytes == Approx(0.875e9));
  // latency = base + (p-1) * alpha = 4,000 + 7 * 700 = 8,900 ns; 0.875e9 / 240e9 = 3,645,833.3 ns
  CHECK(ag.predicted_ns == 3654733);
}

TEST_CASE("all-to-all and send/recv", "[collective]") {
  const Topology t(nvswitch_node(300e9, 4));
  const auto a2a = plan_collective(t, kParams, CollectiveKind::kAllToAll, CollectiveAlgo::kAuto,
                                   iota(4), -1, 4e6);
  // p(p-1) = 12 flows of S/p = 1e6
  CHECK(a2a.flows.size() == 12);
  CHECK(a2a.flows[0].bytes == Approx(1e6));
  const auto sr = plan_collective(t, kParams, CollectiveKind::kSendRecv, CollectiveAlgo::kAuto,
                                  {2, 5}, -1, 1e9);
  // one flow 2 -> 5 capped at 0.81 * 240e9 = 194.4e9: 1e9 / 194.4e9 = 5,144,032.9 ns + 4,700 ns
  REQUIRE(sr.flows.size() == 1);
  CHECK(sr.flows[0].rate_cap_bytes_per_s == Approx(194.4e9));
  CHECK(sr.predicted_ns == 5148733);
}

TEST_CASE("copies: pinned, pageable, D2D, peer over NVLink vs PCIe", "[copy]") {
  const Topology p(pcie_node(2, 3));
  // pinned H2D 12e6 B over bridge down + GPU down at 12e9: 1 ms + alpha 550 ns
  const auto pinned =
      plan_copy(p, kParams, CopyKind::kH2DPinned, Endpoint::host(0), Endpoint::gpu(1), 12e6);
  CHECK(pinned.predicted_ns == 1000550);
  // pageable: capped at 6e9: 2 ms + 550 ns
  const auto pageable =
      plan_copy(p, kParams, CopyKind::kH2DPageable, Endpoint::host(0), Endpoint::gpu(1), 12e6);
  CHECK(pageable.predicted_ns == 2000550);
  // D2H mirrors H2D pinned
  CHECK(plan_copy(p, kParams, CopyKind::kD2H, Endpoint::gpu(0), Endpoint::host(0), 12e6)
            .predicted_ns == 1000550);

  const Topology s(nvswitch_node(300e9, 4));
  // D2D: mem_bw 1e12 * 0.8 / 2 (read + write) = 4e11: 4e8 B -> 1 ms, + 2,000 ns kernel overhead
  const auto d2d = plan_copy(s, kParams, CopyKind::kD2D, Endpoint::gpu(2), Endpoint::gpu(2), 4e8);
  CHECK(d2d.predicted_ns == 1002000);

  ClusterSpec mesh = pcie_node(4, 3);
  mesh.intra.kind = IntraNodeKind::kNvlinkMesh;
  mesh.intra.nvlink_bytes_per_s_per_link = 25e9;
  mesh.intra.nvlink_pairs = {{0, 1, 1}};
  const Topology m(mesh);
  // peer 0 -> 1 over one NVLink (20e9): 2e7 B -> 1 ms + 700 ns
  CHECK(plan_copy(m, kParams, CopyKind::kPeer, Endpoint::gpu(0), Endpoint::gpu(1), 2e7)
            .predicted_ns == 1000700);
  // peer 0 -> 2 through the host on PCIe gen3 (12e9): 2e7 B -> 1.6667 ms + 1,100 ns
  CHECK(plan_copy(m, kParams, CopyKind::kPeer, Endpoint::gpu(0), Endpoint::gpu(2), 2e7)
            .predicted_ns == 1667767);
}

// [SECTION] Calibration cases (docs/cost-model.md, "Calibration"): within 10 % of published values.

TEST_CASE("calibration: nccl_a100x8_allreduce_peak (230 GB/s busbw)", "[calibration]") {
  const Topology t(nvswitch_node(300e9, 4));  // 12 NVLink3 x 25 GB/s per direction
  const double S = 8e9;
  const auto plan = plan_collective(t, kDefaults, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto,
                                    iota(8), -1, S);
  // busbw -> B = 300 * 0.80 = 240 GB/s for large S (+4.3 %)
  const double bw = busbw_gb_per_s(CollectiveKind::kAllReduce, 8, S, plan.predicted_ns);
  CHECK(bw == Approx(240).epsilon(0.01));
  CHECK(std::abs(bw - 230) / 230 < 0.10);
}

TEST_CASE("calibration: nccl_h100x8_ring (370 GB/s busbw)", "[calibration]") {
  const Topology t(nvswitch_node(450e9, 5));  // 18 NVLink4 x 25 GB/s per direction
  const double S = 4e9;
  const auto plan = plan_collective(t, kDefaults, CollectiveKind::kAllReduce, CollectiveAlgo::kRing,
                                    iota(8), -1, S);
  // busbw -> 450 * 0.80 = 360 GB/s (-2.7 %)
  const double bw = busbw_gb_per_s(CollectiveKind::kAllReduce, 8, S, plan.predicted_ns);
  CHECK(bw == Approx(360).epsilon(0.01));
  CHECK(std::abs(bw - 370) / 370 < 0.10);
}

TEST_CASE("calibration: nccl_a100x8_sendrecv_1GB (195.1 GB/s)", "[calibration]") {
  const Topology t(nvswitch_node(300e9, 4));
  const double S = 1073741824;
  const auto plan = plan_collective(t, kDefaults, CollectiveKind::kSendRecv, CollectiveAlgo::kAuto,
                                    iota(8), -1, S);
  // 8 flows i -> i+1, each capped at 0.81 * 240 = 194.4 GB/s; t = S / 194.4e9 + 4.7 us
  // = 5,523,363 + 4,700 ns; busbw = algbw = S / t = 194.2 GB/s (published 195.1, time 5,503.4 us)
  CHECK(plan.flows.size() == 8);
  const double bw = busbw_gb_per_s(CollectiveKind::kSendRecv, 8, S, plan.predicted_ns);
  CHECK(bw == Approx(194.2).epsilon(0.01));
  CHECK(std::abs(bw - 195.1) / 195.1 < 0.10);
  CHECK(std::abs(simulate(t, plan) - plan.predicted_ns) <= 1);
}

TEST_CASE("calibration: nccl_2x4070tis_pcie_latency (6.21 us)", "[calibration]") {
  const Topology t(pcie_node(2, 4));
  const auto plan = plan_collective(t, kDefaults, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto,
                                    iota(2), -1, 8);
  // base + 2(p-1) * alpha_route = 4.0 + 2 * 1.1 = 6.2 us; bandwidth: 8 B of LL on the one channel
  // NCCL runs at 8 B, at most 1 x 6 GB/s / 2 = 3 GB/s (PCIe gen4 graph 2 x 12 GB/s, 4 comm
  // channels; docs/cost-model.md "Channels"): 2.7 ns.
  CHECK(plan.predicted_ns == 6203);
  CHECK(std::abs(plan.predicted_ns - 6210) / 6210.0 < 0.10);
}

TEST_CASE("calibration: nccl_2x8h20_ib_latency (47.5 us)", "[calibration]") {
  ClusterSpec c = nvswitch_node(450e9, 5);
  c.nodes = 2;
  c.nics_per_node = 8;
  c.nic_bytes_per_s = 50e9;  // CX-7 NDR 400 Gb/s
  const Topology t(c);
  // The case forced NCCL_ALGO=NVLSTree, a tree across the nodes (not modelled): our tree stands
  // in, forced (the automatic plan at 8 B is the hierarchical one, 35.0 us: its rings across the
  // nodes take NCCL's ring network ratio 2.7/5.0, docs/cost-model.md "Network hops").
  const auto plan = plan_collective(t, kDefaults, CollectiveKind::kAllReduce, CollectiveAlgo::kTree,
                                    iota(16), -1, 8);
  // tree over 16 ranks (nodes contiguous): deepest leaf path has 3 NVSwitch hops (0.7 us) and one
  // inter-node hop (0.5 + 9.3 + 9.3 + 0.5 = 19.6 us), LL (factor 1 inside and between nodes):
  // base + 2 * (2.1 + 19.6) = 4 + 43.4 = 47.4 us
  CHECK(plan.algo == CollectiveAlgo::kTree);
  CHECK(plan.latency_ns == 47400);
  CHECK(std::abs(plan.predicted_ns - 47500) / 47500.0 < 0.10);
}

TEST_CASE("calibration: nccl_ndr_nic_peak (48.5 GB/s per NIC)", "[calibration]") {
  ClusterSpec c = nvswitch_node(450e9, 5);
  c.nodes = 2;
  c.nics_per_node = 8;
  c.nic_bytes_per_s = 50e9;
  const Topology t(c);
  // a NIC link's capacity: 50 GB/s * 0.97 = 48.5 GB/s
  const auto& r = t.route(Endpoint::gpu(0), Endpoint::gpu(8));
  CHECK(t.links()[r[1]].capacity_bytes_per_s == Approx(48.5e9));
}

// [SECTION] NIC stacks (docs/scenario.md, "cluster.nic") ---------------------------------------
// Each stack's catalogue latency and line-rate fraction (core/hardware/nic_stack.cpp) reproduce the
// published case it was fitted to, through the full default model (channels, protocols, NCCL's
// algorithm choice), as bench_accuracy runs it.

// The published node: the catalog H100 node (NVSwitch, PCIe 5.0) with the instance's NICs.
ClusterSpec cloud_h100(int nodes, int nics, double gbps, NicStack stack) {
  ClusterSpec c = catalog_cluster("H100-SXM5-80GB", nodes, 8);
  c.nics_per_node = nics;
  c.nic_bytes_per_s = gbps * 1e9;
  c.nic.stack = stack;
  return c;
}

TEST_CASE("calibration: nccl_2xp5_efa_latency (69.12 us)", "[calibration][nic]") {
  // 2 x p5.48xlarge: 8 H100 and 32 x 100 Gb/s EFA, which aws-ofi-nccl drives as one 50 GB/s
  // device per GPU. The model's own choice on EFA at 8 B is NVLSTree (on InfiniBand, with its
  // smaller alpha, the hierarchical plan with trees across wins: compared here with NVLSTree
  // forced); only the NIC alpha differs (9.3 vs 21.2 us). Its latency (docs/cost-model.md,
  // "NVLSTree") is base 4 + NVLS 25 + the switch route 0.7 + the trees' round trip across 2 nodes:
  // 2 network hops, each the route alpha 0.5 + a + a + 0.5 us times nvlstree_net_factor 0.454: d t
  // / d a = 2 * 2 * 0.454 = 1.816. On InfiniBand 29.7 + 2 * 19.6 * 0.454 = 47.5 us (the H20 case
  // above, which set the factor); on EFA t_ib + 1.816 * (21.2 - 9.3) = 47.5 + 21.6 = 69.1 us.
  const Topology ib(cloud_h100(2, 8, 50, NicStack::kInfiniband));
  const Topology efa(cloud_h100(2, 8, 50, NicStack::kEfa));
  auto plan = [](const Topology& t, CollectiveAlgo algo) {
    return plan_collective(t, kDefaults, CollectiveKind::kAllReduce, algo, iota(16), -1, 8);
  };
  const TransferPlan a = plan(ib, CollectiveAlgo::kNvlsTree), b = plan(efa, CollectiveAlgo::kAuto);
  CHECK(a.algo == CollectiveAlgo::kNvlsTree);
  CHECK(b.algo == CollectiveAlgo::kNvlsTree);
  CHECK(b.proto == NcclProto::kSimple);
  CHECK(static_cast<double>(b.latency_ns - a.latency_ns) ==
        Approx(2 * 2 * 1000 * kDefaults.nvlstree_net_factor * (21.2 - 9.3)).margin(2));
  CHECK(b.predicted_ns == Approx(69100).margin(50));
  CHECK(std::abs(b.predicted_ns - 69120) / 69120.0 < 0.01);  // the fit
}

TEST_CASE("calibration: nccl_2xa3high_tcpx (1 MiB 1478 us, 2 GiB 65.72 GB/s)",
          "[calibration][nic]") {
  // 2 x a3-highgpu-8g: 8 H100, 4 x 200 Gb/s gVNIC (25 GB/s) for GPUDirect-TCPX; the run forces
  // NCCL_ALGO=Ring, NCCL_PROTO=Simple. 4 rings (one per NIC) of 16 ranks, each S/4.
  // Latency: base 4 + 4.8 (Simple) = 8.8 us, plus 2(p-1)/p = 1.875 times the ring's hops:
  //   14 NVSwitch hops of 0.7 us x 3.4/0.6 (Simple)            = 14 x 3.967 =  55.53 us
  //   2 network hops of (0.5 + 63.1 + 63.1 + 0.5) x 14/5.0      =  2 x 356.2  = 712.32 us
  //   8.8 + 1.875 x 767.85 = 1448.5 us
  // Bandwidth: each ring edge carries 1.875 S/4; a NIC link sustains 25 x 0.673 = 16.825 GB/s:
  //   1 MiB: 491,520 B / 16.825 GB/s = 29.2 us   -> 1477.7 us (published 1478, derived)
  //   2 GiB: 1.00663e9 B / 16.825 GB/s = 59.83 ms -> 61.28 ms, busbw 1.875 x 2^31 / t = 65.71
  const Topology t(cloud_h100(2, 4, 25, NicStack::kGpudirectTcpx));
  CommParams simple;
  simple.proto = NcclProto::kSimple;
  auto plan = [&](double S) {
    return plan_collective(t, simple, CollectiveKind::kAllReduce, CollectiveAlgo::kRing, iota(16),
                           -1, S);
  };
  const TransferPlan small = plan(1048576), big = plan(2147483648.0);
  CHECK(small.flows.size() == 64);
  CHECK(static_cast<double>(small.latency_ns) == Approx(1448525).margin(100));
  CHECK(static_cast<double>(small.predicted_ns) == Approx(1477740).margin(200));
  CHECK(std::abs(small.predicted_ns - 1478000) / 1478000.0 < 0.01);
  const double bw = busbw_gb_per_s(CollectiveKind::kAllReduce, 16, 2147483648.0, big.predicted_ns);
  CHECK(bw == Approx(65.71).epsilon(0.001));
  CHECK(std::abs(bw - 65.72) / 65.72 < 0.01);
}

TEST_CASE("calibration: nccl_2xa3mega_tcpxo (8 MiB 166.6 us, 8 GiB 188.54 GB/s)",
          "[calibration][nic]") {
  // 2 x a3-megagpu-8g: 8 H100, 8 x 200 Gb/s (25 GB/s) for GPUDirect-TCPXO; all_gather with NCCL's
  // own choice: 8 rings (one per NIC), each edge (p-1)/p = 0.9375 of S/8.
  // 8 MiB, ring/LL128: base 4 + 6.4 = 10.4 us, plus 0.9375 times the ring's hops:
  //   14 NVSwitch hops of 0.7 x 1.9/0.6 = 2.217 us = 31.03 us; 2 network hops of
  //   (0.5 + 27.2 + 27.2 + 0.5) x 4.0/5.0 = 44.32 us = 88.64 us; 10.4 + 0.9375 x 119.67 = 122.6 us
  //   each edge 0.9375 x 8 MiB / 8 = 983,040 B, / 0.9375 (LL128) = 1,048,576 B on the wire, at
  //   25 x 0.950 = 23.75 GB/s (below the channel cap of 24 GB/s): 44.15 us -> 166.7 us
  // 8 GiB, ring/Simple: 8.8 + 0.9375 x (55.53 + 2 x 55.4 x 2.8) = 351.7 us; 1.00663e9 B / 23.75
  //   GB/s = 42.384 ms -> 42.736 ms, busbw 0.9375 x 2^33 / t = 188.44
  const Topology t(cloud_h100(2, 8, 25, NicStack::kGpudirectTcpxo));
  auto plan = [&](double S) {
    return plan_collective(t, kDefaults, CollectiveKind::kAllGather, CollectiveAlgo::kAuto,
                           iota(16), -1, S);
  };
  const TransferPlan small = plan(8388608), big = plan(8589934592.0);
  CHECK(small.algo == CollectiveAlgo::kRing);
  CHECK(small.proto == NcclProto::kLL128);
  CHECK(static_cast<double>(small.latency_ns) == Approx(122594).margin(100));
  CHECK(static_cast<double>(small.predicted_ns) == Approx(166744).margin(200));
  CHECK(std::abs(small.predicted_ns - 166600) / 166600.0 < 0.01);
  CHECK(big.proto == NcclProto::kSimple);
  const double bw = busbw_gb_per_s(CollectiveKind::kAllGather, 16, 8589934592.0, big.predicted_ns);
  CHECK(bw == Approx(188.44).epsilon(0.001));
  CHECK(std::abs(bw - 188.54) / 188.54 < 0.01);
}

TEST_CASE("NIC stacks: every catalogue figure names its source", "[nic]") {
  int n = 0;
  const NicStackInfo* s = nic_stacks(&n);
  REQUIRE(n == 5);
  for (int i = 0; i < n; ++i) {
    INFO(s[i].name);
    CHECK(s[i].latency_us > 0);
    CHECK(s[i].efficiency > 0);
    CHECK(s[i].efficiency <= 1);
    // A measured figure names the calibration case it was fitted to; a placeholder says why.
    CHECK(std::string(s[i].latency_source).rfind(s[i].latency_measured ? "fitted: " : "as ", 0) ==
          0);
    CHECK(std::string(s[i].efficiency_source)
              .rfind(s[i].efficiency_measured ? "fitted: " : "as ", 0) == 0);
  }
  // Stacks differ now: TCPX's software path is the slowest hop and the smallest line-rate share.
  CHECK(nic_stack_info(NicStack::kGpudirectTcpx).latency_us == Approx(63.1));
  CHECK(nic_stack_info(NicStack::kGpudirectTcpx).efficiency == Approx(0.673));
  CHECK(nic_stack_info(NicStack::kGpudirectTcpxo).latency_us == Approx(27.2));
  CHECK(nic_stack_info(NicStack::kGpudirectTcpxo).efficiency == Approx(0.950));
  CHECK(nic_stack_info(NicStack::kEfa).latency_us == Approx(21.2));
  CHECK_FALSE(nic_stack_info(NicStack::kEfa).efficiency_measured);
  CHECK_FALSE(nic_stack_info(NicStack::kRoce).latency_measured);
}

// [SECTION] Protocols and NVLS (docs/cost-model.md, "Protocols", "NVLS") ------------------------

TEST_CASE("protocols: LL for small, LL128 for medium, Simple for large ring all-reduces",
          "[collective][protocol]") {
  // 8 GPUs on NVSwitch, B = 240 GB/s per port, hop alpha 0.7 us, 2(p-1) = 14 hops, 1.75 S per
  // ring edge. Predicted time per protocol (base + extra, hops x factor, bandwidth x efficiency):
  //   LL      4.0        + 14 x 0.7            + 1.75 S / (0.5    x 240e9)
  //   LL128   4.0 + 6.4  + 14 x 0.7 x 1.9/0.6  + 1.75 S / (0.9375 x 240e9)
  //   Simple  4.0 + 4.8  + 14 x 0.7 x 3.4/0.6  + 1.75 S / 240e9
  // LL = LL128 at S = 27.63 us / (1.75 x (1/120e9 - 1/225e9)) = 4.06 MB; LL128 = Simple at
  // 22.9 us / (1.75 x (1/225e9 - 1/240e9)) = 47.1 MB. (Links only: NCCL's channel limits, which
  // stop LL at 87.7 GB/s here, are tests/test_nccl_channels.cpp's.)
  const Topology t(nvswitch_node(300e9, 4));
  auto ring = [&](double S) {
    return plan_collective(t, kProtocolsOnly, CollectiveKind::kAllReduce, CollectiveAlgo::kRing,
                           iota(8), -1, S);
  };
  CHECK(ring(1e6).proto == NcclProto::kLL);
  CHECK(ring(16e6).proto == NcclProto::kLL128);
  CHECK(ring(1e9).proto == NcclProto::kSimple);
  // LL128 at 16 MB: latency 10,400 + 31,033.3 ns; each edge carries 1.75 x 16e6 / 0.9375 bytes
  const TransferPlan mid = ring(16e6);
  CHECK(mid.latency_ns == 41433);
  CHECK(mid.flows[0].bytes == Approx(1.75 * 16e6 / 0.9375));
  // Forcing LL on 1 GB halves the bandwidth: 1.75e9 / 120e9 = 14.58 ms (+ 13.8 us)
  CommParams ll = kProtocolsOnly;
  ll.proto = NcclProto::kLL;
  const TransferPlan forced =
      plan_collective(t, ll, CollectiveKind::kAllReduce, CollectiveAlgo::kRing, iota(8), -1, 1e9);
  CHECK(forced.proto == NcclProto::kLL);
  CHECK(forced.predicted_ns == round_to_ns(1.75e9 / 120e9 + 13.8e-6));
}

TEST_CASE("scenario nccl keys force the algorithm and protocol like NCCL_ALGO / NCCL_PROTO",
          "[collective][protocol]") {
  Scenario s;
  s.nccl.algo = CollectiveAlgo::kTree;
  s.nccl.proto = NcclProto::kLL128;
  const CommParams c = comm_params_for(s);
  CHECK(c.algo == CollectiveAlgo::kTree);
  CHECK(c.proto == NcclProto::kLL128);
  const Topology t(nvswitch_node(300e9, 4));
  const TransferPlan p =
      plan_collective(t, c, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, iota(8), -1, 1e9);
  CHECK(p.algo == CollectiveAlgo::kTree);
  CHECK(p.proto == NcclProto::kLL128);
  // NVLS forced where the hardware lacks it (A100-class: no sm_90) falls back to the choice.
  CommParams nv = kDefaults;
  nv.algo = CollectiveAlgo::kNvls;
  CHECK(plan_collective(t, nv, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, iota(8), -1, 1e9)
            .algo != CollectiveAlgo::kNvls);
}

namespace {
ClusterSpec hopper_node() {
  ClusterSpec c = nvswitch_node(450e9, 5);  // 18 NVLink4 x 25 GB/s per direction
  c.gpu.compute_capability = 90;
  return c;
}
}  // namespace

TEST_CASE("calibration: nccl_h100_nvls_by_gpucount (420/440/460/480 GB/s for 5..8 GPUs)",
          "[calibration][nvls]") {
  // NVLS: each GPU sends S up and receives S down at 450 x 0.80 x 0.758 = 272.9 GB/s (algbw),
  // busbw = algbw x 2(p-1)/p: 436.6, 454.8, 467.8, 477.6 GB/s for p = 5..8 (published 420, 440,
  // 460, 480: +4.0, +3.4, +1.7, -0.5 %). Fitted on p = 8 only.
  const Topology t(hopper_node());
  const double published[4] = {420, 440, 460, 480};
  for (int p = 5; p <= 8; ++p) {
    CAPTURE(p);
    const double S = 4e9;
    const TransferPlan plan = plan_collective(t, kDefaults, CollectiveKind::kAllReduce,
                                              CollectiveAlgo::kAuto, iota(p), -1, S);
    CHECK(plan.algo == CollectiveAlgo::kNvls);
    const double bw = busbw_gb_per_s(CollectiveKind::kAllReduce, p, S, plan.predicted_ns);
    const double algbw = 450 * 0.80 * 0.758;
    CHECK(bw == Approx(algbw * 2 * (p - 1) / p).epsilon(0.005));
    CHECK(std::abs(bw - published[p - 5]) / published[p - 5] < 0.05);
    CHECK(std::abs(simulate(t, plan) - plan.predicted_ns) <= 1);
  }
}

TEST_CASE("calibration: nccl_h200x8_allreduce and nccl_h100x8_nvls (475 / 480 GB/s)",
          "[calibration][nvls]") {
  // H200 has H100's NVLink4 (450 GB/s per direction): the same 477.6 GB/s busbw at 4 GB (+0.6 %
  // vs 475; -0.5 % vs 480). The ring stays at 360 (nccl_h100x8_ring), so auto picks NVLS.
  const Topology t(hopper_node());
  const TransferPlan plan = plan_collective(t, kDefaults, CollectiveKind::kAllReduce,
                                            CollectiveAlgo::kAuto, iota(8), -1, 4294967296.0);
  CHECK(plan.algo == CollectiveAlgo::kNvls);
  const double bw = busbw_gb_per_s(CollectiveKind::kAllReduce, 8, 4294967296.0, plan.predicted_ns);
  CHECK(std::abs(bw - 475) / 475 < 0.02);
  CHECK(std::abs(bw - 480) / 480 < 0.02);
}

TEST_CASE("hierarchical all-reduce: its three stages pipelined, every NIC used",
          "[collective][hierarchical]") {
  // 2 nodes x 8 GPUs on NVSwitch (B = 240 GB/s), 8 NICs of 25 GB/s per node; GPU j uses NIC j,
  // whose route is limited by its PCIe gen4 link (24 GB/s). S = 1 GB, protocol-neutral params.
  ClusterSpec c = nvswitch_node(300e9, 4);
  c.nodes = 2;
  c.nics_per_node = 8;
  c.nic_bytes_per_s = 25e9;
  const Topology t(c);
  const double S = 1e9;
  const TransferPlan h = plan_collective(t, kParams, CollectiveKind::kAllReduce,
                                         CollectiveAlgo::kHierarchical, iota(16), -1, S);
  REQUIRE(h.algo == CollectiveAlgo::kHierarchical);
  CHECK(h.then.empty());  // one plan: the stages run at once, chunk by chunk
  // (1) reduce-scatter in each node: 2 rings x 8 edges of (g-1)/g S = 0.875 GB, hops
  //     7/8 x 8 x 700 = 4,900 ns; (2) 8 all-reduces across the 2 nodes, one per local GPU j over
  //     NIC j: 2 edges each of 2(N-1)/N S/g = S/8, hops 1 x 2 x 19.6 us = 39,200 ns; (3)
  //     all-gather in each node as (1). 16 + 16 + 16 flows.
  CHECK(h.flows.size() == 48);
  CHECK(h.flows[0].bytes == Approx(0.875e9));
  CHECK(h.flows[16].bytes == Approx(0.125e9));
  // Latency: one base + every stage's hops = 4,000 + 4,900 + 39,200 + 4,900 = 53,000 ns.
  CHECK(h.latency_ns == 53000);
  // Bandwidth: a GPU's NVSwitch port carries stages 1 and 3, 1.75 GB at 240 GB/s = 7,291,666.7
  // ns; a NIC path carries S/8 at 24 GB/s = 5,208,333 ns. predicted = 53,000 + 7,291,667 ns.
  CHECK(h.predicted_ns == 53000 + 7291667);
  CHECK(std::abs(simulate(t, h) - h.predicted_ns) <= 3);
  // The ring across nodes runs one ring per NIC (docs/cost-model.md, "Rails"): 8 rings, each
  // edge 2 x 15/16 x S/8 = 234.4 MB at 24 GB/s = 9.77 ms, so the automatic choice is hierarchical.
  const TransferPlan flat = plan_collective(t, kParams, CollectiveKind::kAllReduce,
                                            CollectiveAlgo::kRing, iota(16), -1, S);
  CHECK(flat.flows.size() == 8 * 16);
  CHECK(flat.predicted_ns - flat.latency_ns ==
        Approx(2 * 15.0 / 16 * S / 8 / 24e9 * 1e9).margin(2));
  CHECK(flat.predicted_ns > h.predicted_ns);
  CHECK(plan_collective(t, kParams, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, iota(16), -1,
                        S)
            .algo == CollectiveAlgo::kHierarchical);
}
