// Host staging with P2P disabled (docs/cost-model.md, "Host staging"): the staged routes, the
// chunk pipeline's fill and the collective plans over them; expected values derived in comments.
// Calibration: nccl_2x4070tis_pcie_latency (calibration/published/published-measurements.json).
#include <catch2/catch.hpp>

#include "core/cost/collective_cost.hpp"
#include "tests/collective_test_support.hpp"
#include "core/cost/host_staging.hpp"
#include "core/engine/flow_network.hpp"

using namespace csim;
using namespace csim::core;

namespace {

ClusterSpec pcie_pair(int gen, bool p2p) {
  ClusterSpec c;
  c.gpus_per_node = 2;
  c.intra.kind = IntraNodeKind::kPcie;
  c.intra.pcie_gen = gen;
  c.p2p = p2p;
  return c;
}

using csim::test::simulate;  // tests/collective_test_support.hpp

CommParams ring_simple() {
  CommParams c;
  c.algo = CollectiveAlgo::kRing;
  c.proto = NcclProto::kSimple;
  return c;
}

}  // namespace

TEST_CASE("P2P disabled: a GPU -> GPU hop is two copies through host memory", "[staging]") {
  const Topology t(pcie_pair(4, false));
  const auto& r = t.route(Endpoint::gpu(0), Endpoint::gpu(1));
  REQUIRE(r.size() == 5);
  CHECK(t.links()[r[0]].name == "node0/gpu0.pcie.up");
  CHECK(t.links()[r[1]].name == "node0/bridge.up");
  CHECK(t.links()[r[2]].name == "node0/host.staging");
  CHECK(t.links()[r[3]].name == "node0/bridge.down");
  CHECK(t.links()[r[4]].name == "node0/gpu1.pcie.down");
  CHECK(t.staged(Endpoint::gpu(0), Endpoint::gpu(1)));
  CHECK_FALSE(t.staged(Endpoint::gpu(0), Endpoint::host(0)));
  // Gen4 x16: 24 GB/s per PCIe link and bridge direction; host.staging = 24 / 2 = 12 GB/s (the
  // two copies share the bridge), so the hop runs at half the P2P rate.
  CHECK(t.route_bandwidth(Endpoint::gpu(0), Endpoint::gpu(1)) == Approx(12e9));
  CHECK(Topology(pcie_pair(4, true)).route_bandwidth(Endpoint::gpu(0), Endpoint::gpu(1)) ==
        Approx(24e9));
  // Latency: copy in 0.5 + 0.05 us, copy out 0.05 + 0.5 us; host.staging adds none: 1.1 us, the
  // alphas nccl_2x4070tis_pcie_latency (measured without P2P) set.
  CHECK(t.route_alpha_ns(Endpoint::gpu(0), Endpoint::gpu(1)) == Approx(1100));
}

TEST_CASE("P2P disabled on NVSwitch: the GPUs fall back to staged PCIe, no NVLS", "[staging]") {
  ClusterSpec c;
  c.gpus_per_node = 8;
  c.intra.kind = IntraNodeKind::kNvswitch;
  c.intra.nvswitch_bytes_per_s = 450e9;
  c.intra.pcie_gen = 5;
  c.gpu.compute_capability = 90;
  c.p2p = false;
  const Topology t(c);
  CHECK(t.intra_kind() == IntraNodeKind::kPcie);
  // Gen5: 48 GB/s per direction; staged: 48 / 2 = 24 GB/s (not the 360 GB/s of NVSwitch).
  CHECK(t.route_bandwidth(Endpoint::gpu(0), Endpoint::gpu(5)) == Approx(24e9));
  CommParams nvls;
  nvls.algo = CollectiveAlgo::kNvls;
  const TransferPlan p = plan_collective(t, nvls, CollectiveKind::kAllReduce, CollectiveAlgo::kAuto,
                                         {0, 1, 2, 3, 4, 5, 6, 7}, -1, 1e9);
  CHECK(p.algo != CollectiveAlgo::kNvls);
}

TEST_CASE("SHM steps: NCCL's buffer per protocol / NCCL_STEPS", "[staging]") {
  // LL: 8 lines x 512 threads x 8 steps x 16 B / 8 steps = 65,536 B
  CHECK(shm_step_wire_bytes(NcclProto::kLL) == 65536);
  // LL128: 120 x 640 x 8 x 8 B / 8 = 614,400 B
  CHECK(shm_step_wire_bytes(NcclProto::kLL128) == 614400);
  // Simple: 4 MiB / 8 = 524,288 B
  CHECK(shm_step_wire_bytes(NcclProto::kSimple) == 524288);
  // Pipeline steps: ring all-reduce 2(p-1), tree 2 ceil(log2 p), rings p-1, p2p 1, copies 0
  CHECK(staging_pipeline_steps(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, 4) == 6);
  CHECK(staging_pipeline_steps(CollectiveKind::kAllReduce, CollectiveAlgo::kTree, 5) == 6);
  CHECK(staging_pipeline_steps(CollectiveKind::kAllGather, CollectiveAlgo::kRing, 4) == 3);
  CHECK(staging_pipeline_steps(CollectiveKind::kSendRecv, CollectiveAlgo::kAuto, 2) == 1);
  CHECK(staging_pipeline_steps(CollectiveKind::kGather, CollectiveAlgo::kAuto, 4) == 0);
}

TEST_CASE("add_host_staging: steps x staged share x the first chunk's copy in", "[staging]") {
  const Topology t(pcie_pair(4, false));
  TransferPlan plan;
  plan.algo = CollectiveAlgo::kRing;
  plan.proto = NcclProto::kSimple;
  plan.latency_ns = 10000;
  plan.predicted_ns = 50000;
  plan.flows = {{Endpoint::gpu(0), Endpoint::gpu(1), 4e6, 0},
                {Endpoint::gpu(1), Endpoint::gpu(0), 4e6, 0}};
  const TransferPlan s = add_host_staging(t, plan, CollectiveKind::kAllReduce, {0, 1});
  // chunk = min(4e6, 524,288) B, copied in at 24 GB/s (PCIe up, bridge up): 21.845 us; a 2-rank
  // ring all-reduce pipelines 2(p-1) = 2 steps, every flow staged: + 43.690 us
  const TimeNs fill = round_to_ns(2 * 524288.0 / 24e9);
  CHECK(fill == 43691);
  CHECK(s.latency_ns == 10000 + fill);
  CHECK(s.predicted_ns == 50000 + fill);
  // With P2P the plan is unchanged.
  const Topology p2p(pcie_pair(4, true));
  CHECK(add_host_staging(p2p, plan, CollectiveKind::kAllReduce, {0, 1}).latency_ns == 10000);
  // A message smaller than a step fills with itself: 8 B at 24 GB/s = 0.33 ns per step.
  plan.flows = {{Endpoint::gpu(0), Endpoint::gpu(1), 8, 0}};
  CHECK(add_host_staging(t, plan, CollectiveKind::kSendRecv, {0, 1}).latency_ns == 10000);
}

TEST_CASE(
    "staged 2-GPU all-reduce: twice the bridge time plus the fill, as the flow network runs it",
    "[staging]") {
  const double S = 64.0 * 1024 * 1024;
  const Topology off(pcie_pair(4, false)), on(pcie_pair(4, true));
  const TransferPlan a = plan_collective(off, ring_simple(), CollectiveKind::kAllReduce,
                                         CollectiveAlgo::kAuto, {0, 1}, -1, S);
  const TransferPlan b = plan_collective(on, ring_simple(), CollectiveKind::kAllReduce,
                                         CollectiveAlgo::kAuto, {0, 1}, -1, S);
  // Each rank sends 2(p-1)/p S = S. P2P: both flows cross bridge.up (24 GB/s): 2S / 24e9. Staged:
  // both cross host.staging (12 GB/s): 2S / 12e9. The latencies are the same alphas (1.1 us per
  // hop either way) plus the fill 2 x 524,288 / 24e9 = 43.69 us.
  const double extra_s = 2 * S / 12e9 - 2 * S / 24e9 + 2 * 524288.0 / 24e9;
  CHECK(static_cast<double>(a.predicted_ns - b.predicted_ns) * 1e-9 ==
        Approx(extra_s).epsilon(1e-6));
  // The simulator's flow network gives the same time for the plan alone.
  CHECK(simulate(off, a) == Approx(static_cast<double>(a.predicted_ns)).epsilon(1e-6));
}

TEST_CASE("calibration: nccl_2x4070tis_pcie_latency with P2P disabled (6.21 us)",
          "[calibration][staging]") {
  // The case was measured without P2P (GeForce). Staged: latency base 4.0 + 2 hops x 1.1 us =
  // 6.2 us as before; bandwidth: two LL flows of 16 wire bytes through host.staging (12 GB/s),
  // 32 / 12e9 = 2.7 ns; fill: 2 steps x 16 B / 24 GB/s = 1.3 ns, rounded to 1 ns on its own.
  // round(6200 + 2.7) + 1 = 6204 ns (with P2P: 6201, tests/test_collective_cost.cpp).
  const Topology t(pcie_pair(4, false));
  const TransferPlan plan = plan_collective(t, CommParams{}, CollectiveKind::kAllReduce,
                                            CollectiveAlgo::kAuto, {0, 1}, -1, 8);
  CHECK(plan.predicted_ns == 6204);
  CHECK(std::abs(plan.predicted_ns - 6210) / 6210.0 < 0.10);
}
