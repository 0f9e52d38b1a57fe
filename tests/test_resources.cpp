// The resource contract (docs/cost-model.md, "Resource sharing"): DeviceShares (SMs and HBM of a
// GPU) on hand-picked kernels, and the copy engines in the simulator. Each expected time is
// derived in a comment.
#include <catch2/catch.hpp>

#include <cmath>

#include "backends/sim/copy_engines.hpp"
#include "backends/sim/resources.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/cost/hbm_traffic.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/hardware/topology.hpp"
#include "sim_test_scenario.hpp"

using namespace csim;
using namespace csim::core;
using sim::DeviceShares;
using sim::GpuCapacity;

namespace {

// One GPU of 100 SMs whose HBM delivers 1 byte/ns, no straggler.
DeviceShares one_gpu(std::size_t ops) {
  DeviceShares d;
  d.reset({GpuCapacity{100, 1.0, 1.0}}, ops);
  return d;
}

}  // namespace

TEST_CASE("two memory-bound kernels share HBM and are re-rated when one starts or ends",
          "[resources]") {
  // Kernel 0: d = 1 ms moving 1e6 B, so it asks 1e6 / 1e6 = 1 B/ns = all of HBM; alone from 0 it
  // would end at 1,000,000 ns. Kernel 1, the same, starts at 500,000 ns: both ask 1 B/ns of 1, so
  // each gets 0.5 and runs at factor 1 / 0.5 = 2. Kernel 0 has 0.5 ms of model time left, ends at
  // 500,000 + 2 x 500,000 = 1,500,000 (re-rated: generation 1). Kernel 1 would end at
  // 500,000 + 2 x 1,000,000 = 2,500,000; when kernel 0 ends at 1.5 ms it has done
  // 1,000,000 / 2 = 500,000 ns of model time, runs the other 500,000 alone: ends at 2,000,000.
  DeviceShares d = one_gpu(2);
  CHECK(d.start_kernel(0, 0, 0, 1'000'000, 1e6) == 1'000'000);
  CHECK(d.moved().empty());
  CHECK(d.start_kernel(1, 0, 500'000, 1'000'000, 1e6) == 2'500'000);
  REQUIRE(d.moved().size() == 1);
  CHECK(d.moved()[0].op == 0);
  CHECK(d.moved()[0].generation == 1);
  CHECK(d.moved()[0].end_ns == 1'500'000);
  CHECK(d.generation(0) == 1);
  CHECK(d.factor_of(1, 0) == 2.0);
  d.finish_kernel(0, 0, 1'500'000);
  REQUIRE(d.moved().size() == 1);
  CHECK(d.moved()[0].op == 1);
  CHECK(d.moved()[0].end_ns == 2'000'000);
  CHECK(d.factor_of(1, 0) == 1.0);
}

TEST_CASE("HBM water-filling: a kernel that asks less than its share keeps its speed",
          "[resources]") {
  // Kernel 0 (compute-bound): d = 1 ms, 250,000 B: asks 0.25 B/ns. Kernel 1 (memory-bound): d =
  // 1 ms, 1e6 B: asks 1. Together 1.25 > 1: by increasing ask, kernel 0 takes 0.25 <= the fair
  // share 1 / 2 and keeps factor 1; kernel 1 gets the 0.75 left, factor 1 / 0.75, and ends at
  // llround(1e6 x 4 / 3) = 1,333,333.
  DeviceShares d = one_gpu(2);
  CHECK(d.start_kernel(0, 0, 0, 1'000'000, 250'000) == 1'000'000);
  CHECK(d.start_kernel(1, 0, 0, 1'000'000, 1e6) == 1'333'333);
  CHECK(d.moved().empty());  // kernel 0 keeps factor 1
  CHECK(d.factor_of(0, 0) == 1.0);
}

TEST_CASE("a GEMM is re-rated when an NCCL kernel takes SMs and HBM mid-way", "[resources]") {
  // A100-like: 108 SMs, HBM 1 B/ns. A GEMM (d = 1 ms, 1e5 B: asks 0.1 B/ns) starts at 0. At
  // 400,000 ns an NCCL kernel takes 16 SMs and moves 0.5 B/ns: f_sm = 108 / 92, the asks
  // 0.1 / f_sm + 0.5 < 1 fit, so the GEMM runs at f_sm: 600,000 ns of model time left end at
  // 400,000 + llround(600,000 x 108 / 92) = 400,000 + 704,348 = 1,104,348. At 800,000 the NCCL
  // kernel ends: model time left 600,000 - 400,000 x 92 / 108 = 259,259.26, alone: ends at
  // 800,000 + 259,259 = 1,059,259.
  DeviceShares d;
  d.reset({GpuCapacity{108, 1.0, 1.0}}, 2);
  CHECK(d.start_kernel(0, 0, 0, 1'000'000, 1e5) == 1'000'000);
  d.set_holder(1, 0, 400'000, 16, 0.5);
  REQUIRE(d.moved().size() == 1);
  CHECK(d.moved()[0].end_ns == 1'104'348);
  d.set_holder(1, 0, 800'000, 0, 0);
  REQUIRE(d.moved().size() == 1);
  CHECK(d.moved()[0].end_ns == 1'059'259);
  CHECK(d.generation(0) == 2);

  // A memory-bound kernel (d = 1 ms, 9e5 B: asks 0.9) beside NCCL traffic of 0.5 B/ns holding no
  // SMs: 1.4 > 1; by increasing ask NCCL takes 0.5 <= 1 / 2, the kernel the 0.5 left: factor
  // 0.9 / 0.5 = 1.8 from 0: ends at 1,800,000.
  DeviceShares m;
  m.reset({GpuCapacity{108, 1.0, 1.0}}, 2);
  m.set_holder(1, 0, 0, 0, 0.5);
  CHECK(m.start_kernel(0, 0, 0, 1'000'000, 9e5) == 1'800'000);
  CHECK(m.factor_of(0, 0) == Approx(1.8));
}

TEST_CASE("ties: kernels of equal asks get equal shares whatever their start order",
          "[resources]") {
  // Three kernels asking 1 B/ns each on 1 B/ns: each gets 1 / 3, factor 3: d = 1,000 ns ends at
  // 3,000 for all, in start order of the moves (determinism: ties by insertion order).
  DeviceShares d = one_gpu(3);
  d.start_kernel(0, 0, 0, 1000, 1000);
  d.start_kernel(1, 0, 0, 1000, 1000);
  CHECK(d.start_kernel(2, 0, 0, 1000, 1000) == 3000);
  REQUIRE(d.moved().size() == 2);
  CHECK(d.moved()[0].op == 0);
  CHECK(d.moved()[1].op == 1);
  CHECK(d.moved()[0].end_ns == 3000);
  CHECK(d.moved()[1].end_ns == 3000);
}

TEST_CASE("NCCL HBM traffic per member", "[resources]") {
  // docs/cost-model.md, "Resource sharing": ring all-reduce over 8 ranks of S = 1e6 B: a member
  // receives 2 x 7 / 8 x S = 1.75e6 B, 4 accesses each: 7e6. All-gather: 7 / 8 x S x 3 = 2.625e6.
  // NVLS all-reduce: 2 x S. Send/recv: 1 x S x 2.
  CHECK(nccl_hbm_bytes(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, 8, 1e6) == Approx(7e6));
  CHECK(nccl_hbm_bytes(CollectiveKind::kAllGather, CollectiveAlgo::kRing, 8, 1e6) ==
        Approx(2.625e6));
  CHECK(nccl_hbm_bytes(CollectiveKind::kAllReduce, CollectiveAlgo::kNvls, 8, 1e6) == Approx(2e6));
  CHECK(nccl_hbm_bytes(CollectiveKind::kSendRecv, CollectiveAlgo::kAuto, 2, 1e6) == Approx(2e6));
}

namespace {

Scenario one_a100() {
  Scenario s = test::a100_node(1);  // with a free host: no Python, dispatch or launch latency
  s.host.python = false;
  s.host.python_us_per_op = 0;
  s.host.dispatch_us_per_op = 0;
  s.host.launch_latency_us = 0;
  return s;
}

}  // namespace

TEST_CASE("copy engines: one per direction, shared by the copies of that direction",
          "[resources][sim]") {
  const Scenario s = one_a100();
  const Topology topo(s.cluster);
  const sim::CopyEngines ce(topo);
  // Two engine links per GPU after the topology's, each as fast as the GPU's PCIe link that way.
  REQUIRE(ce.links().size() == topo.links().size() + 2);
  const double h2d_bw = topo.route_bandwidth(Endpoint::host(0), Endpoint::gpu(0));
  CHECK(
      ce.links()[static_cast<std::size_t>(ce.h2d(0))].capacity_bytes_per_s ==
      topo.links()[static_cast<std::size_t>(topo.route(Endpoint::host(0), Endpoint::gpu(0)).back())]
          .capacity_bytes_per_s);

  // Two H2D copies of S bytes on two streams and a D2H copy on a third, all at 0 (no launch
  // latency, no host time). The H2D pair share their engine: each moves at rate / 2 and both end
  // at latency + 2 S / rate; the D2H copy has its own engine and ends at latency + S / rate.
  Program p;
  p.world_gpus = 1;
  p.gpus_per_node = 1;
  p.active_gpus = {0};
  p.processes.push_back({0, 0, "main", false});
  p.threads.push_back({0, 0, 0, "main"});
  for (int i = 0; i < 3; ++i) p.streams.push_back({i, 0, StreamRole::kCopy, "copy"});
  const Bytes bytes = 100'000'000;
  for (int i = 0; i < 3; ++i) {
    Op op;
    op.id = static_cast<OpId>(p.ops.size());
    op.kind = OpKind::kCopy;
    op.name = p.names.intern("copy");
    op.thread = 0;
    op.stream = i;
    op.gpu = 0;
    op.copy_kind = i < 2 ? CopyKind::kH2DPinned : CopyKind::kD2H;
    op.bytes = bytes;
    p.ops.push_back(op);
  }
  REQUIRE(validate_program(p).empty());
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, {});
  const double alone_ns = static_cast<double>(bytes) / h2d_bw * 1e9;
  const TimeNs lat = static_cast<TimeNs>(topo.route_alpha_ns(Endpoint::host(0), Endpoint::gpu(0)));
  CHECK(r.timings[0].end_ns == r.timings[1].end_ns);
  CHECK(static_cast<double>(r.timings[0].end_ns - lat) == Approx(2 * alone_ns).epsilon(1e-6));
  const TimeNs lat_d2h =
      static_cast<TimeNs>(topo.route_alpha_ns(Endpoint::gpu(0), Endpoint::host(0)));
  CHECK(static_cast<double>(r.timings[2].end_ns - lat_d2h) == Approx(alone_ns).epsilon(1e-6));
}
