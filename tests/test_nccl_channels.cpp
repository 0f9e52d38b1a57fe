// NCCL's channels, rails, the pipelined hierarchical all-reduce, CollNet and the algorithm gates
// (docs/cost-model.md, "Channels", "Rails", "Hierarchical all-reduce", "CollNet",
// "Algorithm gates"); expected values derived in comments.
#include <catch2/catch.hpp>

#include <set>

#include "core/cost/collective_cost.hpp"
#include "core/cost/nccl_channels.hpp"
#include "core/engine/flow_network.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/scenario/parse_nccl.hpp"
#include "tests/collective_test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// A DGX-style cluster of the catalogue GPU: 8 GPUs per node on its default NVSwitch, its NICs.
ClusterSpec dgx(const char* gpu, int nodes) {
  return catalog_cluster(gpu, nodes, 8);
}

using csim::test::iota;
using csim::test::simulate;  // tests/collective_test_support.hpp

double busbw(CollectiveKind k, int p, double bytes, TimeNs t) {
  return bytes / (static_cast<double>(t) * 1e-9) * busbw_factor(k, p) / 1e9;
}

}  // namespace

// [SECTION] Graph search and channels by size ---------------------------------------------------

TEST_CASE("NCCL ring graph: channels and per-channel bandwidth as search.cc finds them",
          "[collective][channels]") {
  // docs/cost-model.md, "Channels", table. A100 one node, T = 240: 40 -> 6 channels (240); 30 and
  // 20 give no more; duplicated (40 >= 25, sm80 is not > 80): 12 x 20; comm 24.
  NcclRingGraph g = nccl_ring_graph(80, false, 240e9, 0, 0, 1);
  CHECK(g.graph_channels == 12);
  CHECK(g.graph_bw_bytes_per_s == Approx(20e9));
  CHECK(g.comm_channels == 24);
  CHECK(g.channel_bytes_per_s() == Approx(10e9));
  // H100 one node, T = 360: 60 -> 6 (360); 50 -> 7 (350), 40 -> 9 (360), 30 -> 12 (360): none
  // strictly more; duplicated (60 >= 50 on sm90): 12 x 30; comm 24.
  g = nccl_ring_graph(90, false, 360e9, 0, 0, 1);
  CHECK(g.graph_channels == 12);
  CHECK(g.graph_bw_bytes_per_s == Approx(30e9));
  // DGX A100 across nodes, 8 NICs of 25 GB/s: 24 is the fastest inter speed <= 25: 8 x 1 channels
  // (192); 12 -> 16 channels (192) is not more; no duplication (24 < 25): 8 x 24; comm 16.
  g = nccl_ring_graph(80, true, 240e9, 25e9, 8, 4);
  CHECK(g.graph_channels == 8);
  CHECK(g.graph_bw_bytes_per_s == Approx(24e9));
  CHECK(g.comm_channels == 16);
  // DGX H100 across nodes, 8 NICs of 50: 48 -> min(360/48 = 7, 8) = 7 (336); 45 -> 8 (360);
  // no duplication on sm90 (45 < 50, 8 > 4 channels): 8 x 45; comm 16.
  g = nccl_ring_graph(90, true, 360e9, 50e9, 8, 2);
  CHECK(g.graph_channels == 8);
  CHECK(g.graph_bw_bytes_per_s == Approx(45e9));
  // 2 GPUs on PCIe gen4 (24): 20 -> 1 (20); 12 -> 2 (24) is more; 6 -> 4 (24) is not: 2 x 12.
  g = nccl_ring_graph(89, false, 24e9, 0, 0, 1);
  CHECK(g.graph_channels == 2);
  CHECK(g.graph_bw_bytes_per_s == Approx(12e9));
  CHECK(g.comm_channels == 4);
  // From a Topology: 8 A100s on their NVSwitch (0.80 x 300 = 240 GB/s) give the first row.
  const Topology t(dgx("A100-SXM4-80GB", 1));
  g = nccl_ring_graph(t, iota(8));
  CHECK(g.graph_channels == 12);
  CHECK(g.comm_channels == 24);
}

TEST_CASE("NCCL channels by size (enqueue.cc) and per-protocol limits (tuning.cc)",
          "[collective][channels]") {
  const NcclRingGraph g = nccl_ring_graph(80, false, 240e9, 0, 0, 1);  // 24 x 10 GB/s
  // Simple: 512 threads x 64 B: all 24 channels from 24 x 32,768 = 786,432 B; 256 KiB -> 8.
  CHECK(nccl_channels_for(g, CollectiveAlgo::kRing, NcclProto::kSimple, 8, 1048576) == 24);
  CHECK(nccl_channels_for(g, CollectiveAlgo::kRing, NcclProto::kSimple, 8, 262144) == 8);
  // LL ring: 512 threads x 8 x p (= 64) B per channel: 64 KiB -> 2 channels.
  CHECK(nccl_channels_for(g, CollectiveAlgo::kRing, NcclProto::kLL, 8, 65536) == 2);
  // LL tree: threshold 8 B (no x p): 64 KiB / 4,096 = 16 channels.
  CHECK(nccl_channels_for(g, CollectiveAlgo::kTree, NcclProto::kLL, 8, 65536) == 16);
  // LL128: 640 x 8 = 5,120 B per channel: 8 B -> 1 channel.
  CHECK(nccl_channels_for(g, CollectiveAlgo::kRing, NcclProto::kLL128, 8, 8) == 1);
  // Limits with all 24 channels (Ampere, one node): Simple 24 x 10 = 240; LL128
  // 24 x min(10 x 120/128, 20 / 2) = 225; LL min(24 x 10 / 2, 87.7) = 87.7; tree Simple
  // 24 x min(10, 24.0 / 2) = 240; tree LL min(240 / 3.8, 87.7) = 63.2.
  const NcclArch a = NcclArch::kAmpere;
  CHECK(nccl_busbw_cap(g, a, NcclProto::kSimple, false, 24) == Approx(240e9));
  CHECK(nccl_busbw_cap(g, a, NcclProto::kLL128, false, 24) == Approx(225e9));
  CHECK(nccl_busbw_cap(g, a, NcclProto::kLL, false, 24) == Approx(87.7e9));
  CHECK(nccl_busbw_cap(g, a, NcclProto::kSimple, true, 24) == Approx(240e9));
  CHECK(nccl_busbw_cap(g, a, NcclProto::kLL, true, 24) == Approx(240e9 / 3.8));
  // 8 channels at 256 KiB: Simple 80 GB/s.
  CHECK(nccl_busbw_cap(g, a, NcclProto::kSimple, false, 8) == Approx(80e9));
}

TEST_CASE("channels make busbw grow with the size below the plateau, the plateau is unchanged",
          "[collective][channels]") {
  // 8 A100s: with every channel in use the Simple cap (240) equals the NVSwitch port (0.80 x 300),
  // so at 8 GB the channel model changes nothing (nccl_a100x8_allreduce_peak stays); at 256 KiB a
  // Simple ring runs 8 of 24 channels (80 GB/s), so it is slower than without channels.
  const Topology t(dgx("A100-SXM4-80GB", 1));
  CommParams on, off;
  off.channel_model = false;
  on.proto = off.proto = NcclProto::kSimple;
  auto time = [&](const CommParams& c, double S) {
    return plan_collective(t, c, CollectiveKind::kAllReduce, CollectiveAlgo::kRing, iota(8), -1, S)
        .predicted_ns;
  };
  CHECK(time(on, 8e9) == time(off, 8e9));
  // 256 KiB: 1.75 x 262,144 / 80e9 = 5.73 us of bandwidth instead of / 240e9 = 1.91 us.
  CHECK(time(on, 262144) - time(off, 262144) ==
        Approx(1.75 * 262144 * (1 / 80e9 - 1 / 240e9) * 1e9).margin(2));
}

// [SECTION] Rails --------------------------------------------------------------------------------

TEST_CASE("a forced ring across nodes runs one ring per NIC (rails)", "[collective][rails]") {
  // 4 DGX A100 nodes (32 GPUs, 8 NICs x 25 GB/s, PCIe gen4 24 GB/s per GPU), NCCL_ALGO=Ring,
  // 1 GiB. 8 rings, ring c leaving each node from GPU c-1 (NIC c-1) and entering at GPU c: 8 x 32
  // flows; the 8 NIC up links of node 0 each carry one ring's crossing.
  const Topology t(dgx("A100-SXM4-80GB", 4));
  CommParams c;
  c.proto = NcclProto::kSimple;
  const double S = 1073741824.0;
  const TransferPlan r =
      plan_collective(t, c, CollectiveKind::kAllReduce, CollectiveAlgo::kRing, iota(32), -1, S);
  CHECK(r.algo == CollectiveAlgo::kRing);
  CHECK(r.flows.size() == 8 * 32);
  std::set<LinkId> nic_up;
  for (const FlowSpec& f : r.flows)
    for (LinkId l : t.route(f.src, f.dst))
      if (t.links()[l].kind == LinkKind::kNic && t.links()[l].node == 0 &&
          t.links()[l].name.find(".up") != std::string::npos)
        nic_up.insert(l);
  CHECK(nic_up.size() == 8);
  // Bandwidth: each ring edge carries 2 x 31/32 x S/8 = 260,046,848 B, at most 192 / 8 = 24 GB/s
  // (the inter-node graph's 16 channels x 12 GB/s, also the PCIe link): 10.835 ms. Latency:
  // 8.8 us + 31/16 x (28 NVSwitch routes x 0.7 x 5.667 + 4 crossings x 19.6 us x 2.8, Simple's
  // ring factors inside a node and between nodes, docs/cost-model.md "Network hops") = 649.3 us.
  // busbw = 31/16 x S / 11.484 ms = 181.1 GB/s, against 24 GB/s for one ring on one NIC.
  const double bw = busbw(CollectiveKind::kAllReduce, 32, S, r.predicted_ns);
  CHECK(bw == Approx(181.1).epsilon(0.01));
  CHECK(std::abs(simulate(t, r) - r.predicted_ns) <= 2);
}

// [SECTION] Hierarchical, pipelined -------------------------------------------------------------

TEST_CASE("hierarchical all-reduce: the three stages pipelined in one plan",
          "[collective][hierarchical]") {
  // 2 DGX A100 nodes, 1 GB, Simple, stage 2 as rings. One plan (no `then`): 16 + 16 flows of the
  // two intra-node stages (2 rings x 8 edges each) and 16 of stage 2 (8 rings over 2 nodes).
  // Bandwidth: the NVSwitch port of a GPU carries both intra stages, 2 x 7/8 x 1 GB = 1.75 GB at
  // 240 GB/s = 7.29 ms; a NIC path carries stage 2's 2 x 1/2 x S/8 = 125 MB at <= 24 GB/s
  // (PCIe gen4; one rail's graph: 2 channels x 12 GB/s) = 5.21 ms. So 7.29 ms + latency.
  const Topology t(dgx("A100-SXM4-80GB", 2));
  CommParams c;
  c.proto = NcclProto::kSimple;
  c.algo = CollectiveAlgo::kHierarchical;
  const double S = 1e9;
  const TransferPlan h =
      plan_collective(t, c, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, iota(16), -1, S);
  REQUIRE(h.algo == CollectiveAlgo::kHierarchical);
  CHECK(h.then.empty());
  CHECK(h.flows.size() == 48);
  // Latency: base 8.8 us + stage 1 7/8 x 8 x 0.7 x 5.667 = 27.77 us + stage 2 (rings over 2
  // nodes) 2 x 1/2 x 2 x 19.6 x 2.8 (Simple's network factor, "Network hops") = 109.76 us +
  // stage 3 27.77 us = 174.09 us.
  CHECK(h.latency_ns == Approx(174093).margin(2));
  CHECK(h.predicted_ns == Approx(174093 + 1.75e9 / 240e9 * 1e9).margin(3));
  // The flow network agrees: every flow is limited by its own stage's bottleneck.
  CHECK(std::abs(simulate(t, h) - h.predicted_ns) <= 3);
}

TEST_CASE("1 GiB all-reduce on 64 and 1,024 A100s: the NIC bound plus NCCL's latency terms",
          "[collective][hierarchical]") {
  // Bound 2(p-1)/p x S / B, B = 8 x 25 GB/s per DGX A100 node: 10.57 ms (64 GPUs), 10.73 ms
  // (1,024). The hierarchical plan, forced (intra-node stages: 1.75 S through each NVSwitch port
  // at 240 GB/s = 7.83 ms, below the NICs); the automatic choice tries it with trees across only
  // (below).
  const double S = 1073741824.0;
  auto plan_on = [&](int nodes, CollectiveAlgo algo = CollectiveAlgo::kHierarchical) {
    const Topology t(dgx("A100-SXM4-80GB", nodes));
    return plan_collective(t, CommParams{}, CollectiveKind::kAllReduce, algo, iota(nodes * 8), -1,
                           S);
  };
  auto bound_ns = [&](int p) { return 2.0 * (p - 1) / p * S / 200e9 * 1e9; };
  // 8 nodes, Simple, rings across: each NIC path carries 2 x 7/8 x S/8 at 24 GB/s (one rail's
  // channels, 2 x 12 GB/s; also the PCIe link) = 9,786,709 ns. Latency (NCCL's terms: one base,
  // every stage's hops at Simple's factors, 3.4/0.6 inside a node, 14/5.0 between nodes): 8.8 +
  // 2 x 27.77 (intra stages) + 7/4 x 8 x 19.6 x 2.8 (crossings) = 832.65 us. 10.62 ms = 1.005 x
  // the bound (1.08 x with NCCL's NVLink ratio on the crossings, 1.75 x with the stages in turn).
  const TransferPlan p64 = plan_on(8);
  CHECK(p64.algo == CollectiveAlgo::kHierarchical);
  CHECK(p64.proto == NcclProto::kSimple);
  CHECK(p64.latency_ns == Approx(832653).margin(3));
  CHECK(p64.predicted_ns == Approx(832653 + 1.75 * S / 8 / 24e9 * 1e9).margin(3));
  CHECK(p64.predicted_ns / bound_ns(64) == Approx(1.0047).epsilon(0.002));
  // Automatic on 64 GPUs: no NCCL algorithm sends less than the ring's 2(p-1)/p x S/8 per NIC, so
  // rings across are not a candidate; NCCL's ring runs at the bound's NICs, each NIC path at
  // 24 GB/s: 2 x 63/64 x S/8 / 24e9 = 11.01 ms, above the bound (NCCL's own model: 12.24 ms).
  const TransferPlan a64 = plan_on(8, CollectiveAlgo::kAuto);
  CHECK(a64.algo == CollectiveAlgo::kRing);
  CHECK(a64.predicted_ns > bound_ns(64));
  CHECK(static_cast<double>(a64.predicted_ns - a64.latency_ns) >=
        2.0 * 63 / 64 * S / 8 / 24e9 * 1e9 * 0.999);
  // 128 nodes: rings across would pay 2 x 127 crossings of latency (28 ms); trees across pay
  // 2 x 7 and win. LL128 trees: NCCL's per-channel tree limit (tuning.cc perChMaxTreeLL128Bw 20
  // GB/s per graph channel on Ampere) gives one rail 2 x min(12 x 120/128, 20 / 2) = 20 GB/s of
  // payload; its busiest NIC carries 2 x S/8: 13.42 ms, + 0.51 ms of latency (base 10.4 us, the
  // intra stages 24.8 us, 2 x 7 tree levels x 19.6 us x LL128's tree network factor 8.5/5.0) =
  // 13.93 ms = 1.30 x the bound (1.34 x with NCCL's NVLink ratio on the crossings; 3.2 x with the
  // stages in turn).
  const TransferPlan p1024 = plan_on(128);
  CHECK(p1024.algo == CollectiveAlgo::kHierarchical);
  CHECK(p1024.proto == NcclProto::kLL128);
  CHECK(p1024.predicted_ns - p1024.latency_ns == Approx(2 * S / 8 / 20e9 * 1e9).epsilon(1e-4));
  CHECK(p1024.latency_ns == Approx(10400 + 24820 + 14 * 19600 * 1.7).epsilon(0.02));
  CHECK(p1024.predicted_ns / bound_ns(1024) == Approx(1.2986).epsilon(0.002));
}

// [SECTION] CollNet and gates ------------------------------------------------------------------

TEST_CASE("CollNet: in-network reduction with SHARP switches", "[collective][collnet]") {
  // 8 DGX A100 nodes with SHARP. CollNet sends S/8 per NIC each way (1 GiB: 134 MB at 24 GB/s =
  // 5.59 ms), below the NVSwitch ports' 1.75 S / 240 GB/s = 7.83 ms; the hierarchical plan's NICs
  // carry 2 x 7/8 x S/8 (9.79 ms). So CollNet is chosen, bounded by the NVSwitch: 7.83 ms +
  // latency.
  ClusterSpec cs = dgx("A100-SXM4-80GB", 8);
  const double S = 1073741824.0;
  {
    const Topology t(cs);  // no SHARP: never CollNet, even forced (falls back)
    CommParams c;
    c.algo = CollectiveAlgo::kCollnet;
    CHECK(plan_collective(t, c, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, iota(64), -1, S)
              .algo != CollectiveAlgo::kCollnet);
  }
  cs.fabric.sharp = true;
  const Topology t(cs);
  const TransferPlan plan = plan_collective(t, CommParams{}, CollectiveKind::kAllReduce,
                                            CollectiveAlgo::kAuto, iota(64), -1, S);
  CHECK(plan.algo == CollectiveAlgo::kCollnet);
  CHECK(plan.proto == NcclProto::kSimple);
  const double bw_s = 1.75 * S / 240e9;
  CHECK(static_cast<double>(plan.predicted_ns - plan.latency_ns) * 1e-9 ==
        Approx(bw_s).epsilon(1e-3));
  CHECK(std::abs(simulate(t, plan) - plan.predicted_ns) <= 3);
}

TEST_CASE("algorithm gates: NVLS on Hopper NVSwitch in one node, CollNet with SHARP",
          "[collective][gates]") {
  // NCCL 2.2x (search.cc, tuning.cc): DGX A100 has no NVLS; DGX H100 has it in one node and,
  // across nodes, only with CollNet; CollNet needs SHARP switches and two or more nodes.
  CHECK(!parse::nccl_algo_gate(CollectiveAlgo::kNvls, dgx("A100-SXM4-80GB", 1)).empty());
  CHECK(parse::nccl_algo_gate(CollectiveAlgo::kNvls, dgx("H100-SXM5-80GB", 1)).empty());
  CHECK(!parse::nccl_algo_gate(CollectiveAlgo::kNvls, dgx("H100-SXM5-80GB", 2)).empty());
  ClusterSpec sharp = dgx("H100-SXM5-80GB", 2);
  sharp.fabric.sharp = true;
  CHECK(parse::nccl_algo_gate(CollectiveAlgo::kNvls, sharp).empty());
  CHECK(parse::nccl_algo_gate(CollectiveAlgo::kCollnet, sharp).empty());
  CHECK(!parse::nccl_algo_gate(CollectiveAlgo::kCollnet, dgx("H100-SXM5-80GB", 2)).empty());
  CHECK(!parse::nccl_algo_gate(CollectiveAlgo::kCollnet, dgx("H100-SXM5-80GB", 1)).empty());
  CHECK(parse::nccl_algo_gate(CollectiveAlgo::kRing, dgx("A100-SXM4-80GB", 1)).empty());
  // The automatic choice on 2 DGX H100 nodes never plans NVLS (multi-node NVLS needs CollNet).
  const Topology t(dgx("H100-SXM5-80GB", 2));
  for (double S : {1e6, 1e8, 4e9})
    CHECK(plan_collective(t, CommParams{}, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto,
                          iota(16), -1, S)
              .algo != CollectiveAlgo::kNvls);
}
