// The discrete-event simulator on hand-built Programs, each expected time derived in a comment
// from the execution rules in docs/program.md and the cost model in docs/cost-model.md.
#include <catch2/catch.hpp>

#include "backends/sim/host_model.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/cost/collective_cost.hpp"
#include "core/cost/compute_cost.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/hardware/topology.hpp"
#include "sim_test_scenario.hpp"

using namespace csim;
using namespace csim::core;

namespace {

Scenario two_gpu_scenario() {
  return test::a100_node(2);
}

struct Built {
  Program p;
  int proc = 0;
};

Program skeleton(int threads_on_one_process, bool gil) {
  Program p;
  p.world_gpus = 2;
  p.gpus_per_node = 2;
  p.active_gpus = {0, 1};
  p.processes.push_back({0, 0, "python", gil});
  for (int t = 0; t < threads_on_one_process; ++t)
    p.threads.push_back({t, 0, t % 2, "t" + std::to_string(t)});
  p.streams.push_back({0, 0, StreamRole::kCompute, "compute"});
  p.streams.push_back({1, 1, StreamRole::kCompute, "compute"});
  return p;
}

OpId add_kernel(Program& p, int thread, int stream, double flops, TimeNs python, TimeNs dispatch,
                std::vector<Dep> deps = {}) {
  Op op;
  op.id = static_cast<OpId>(p.ops.size());
  op.kind = OpKind::kCompute;
  op.name = p.names.intern("k" + std::to_string(op.id));
  op.thread = thread;
  op.stream = stream;
  op.gpu = p.streams[stream].gpu;
  op.compute_kind = ComputeKind::kGemm;
  op.dtype = Dtype::kFp32;
  op.flops = flops;
  op.python_ns = python;
  op.dispatch_ns = dispatch;
  op.deps = std::move(deps);
  p.ops.push_back(op);
  return op.id;
}

}  // namespace

TEST_CASE("tiny kernels are launch-bound: start = issue end + launch latency", "[sim]") {
  const Scenario s = two_gpu_scenario();
  Program p = skeleton(1, true);
  // 5 kernels of 1000 FLOPs: each takes 4.8 us Python + 2.0 us dispatch to issue.
  for (int i = 0; i < 5; ++i) add_kernel(p, 0, 0, 1000, 4800, 2000);
  REQUIRE(validate_program(p).empty());
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, {});
  const TimeNs d = compute_duration_ns(s.cluster.gpu, ComputeKind::kGemm, Dtype::kFp32, 1000, 0);
  REQUIRE(d < 6800);  // the GPU is faster than the host can issue
  for (int i = 0; i < 5; ++i) {
    // issue of kernel i ends at (i+1) x 6.8 us; it starts 4 us later on an idle stream
    CHECK(r.timings[i].issue_end_ns == (i + 1) * 6800);
    CHECK(r.timings[i].start_ns == (i + 1) * 6800 + 4000);
    CHECK(r.timings[i].end_ns == r.timings[i].start_ns + d);
  }
}

TEST_CASE("a host running ahead of the GPU costs nothing: kernels queue back to back", "[sim]") {
  const Scenario s = two_gpu_scenario();
  Program p = skeleton(1, true);
  // 3 large GEMMs (1e12 FLOPs each, tens of ms) issued 6.8 us apart: each starts when the previous
  // ends
  for (int i = 0; i < 3; ++i) add_kernel(p, 0, 0, 1e12, 4800, 2000);
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, {});
  const TimeNs d = compute_duration_ns(s.cluster.gpu, ComputeKind::kGemm, Dtype::kFp32, 1e12, 0);
  CHECK(r.timings[0].start_ns == 6800 + 4000);
  CHECK(r.timings[1].start_ns == r.timings[0].end_ns);
  CHECK(r.timings[2].end_ns == 6800 + 4000 + 3 * d);
}

TEST_CASE("the GIL serialises Python time of threads in one process, free-threaded does not",
          "[sim][gil]") {
  const Scenario s = two_gpu_scenario();
  for (bool gil : {true, false}) {
    Program p = skeleton(2, gil);
    // two threads each issue one op with 10 us of Python and no dispatch
    add_kernel(p, 0, 0, 1000, 10000, 0);
    add_kernel(p, 1, 1, 1000, 10000, 0);
    sim::SimExecutor ex(s);
    const ExecutionResult r = ex.run(p, {});
    // thread 0 takes the GIL at t=0 (insertion order breaks the tie); thread 1 waits 10 us for it
    CHECK(r.timings[0].gil_wait_ns == 0);
    CHECK(r.timings[1].gil_wait_ns == (gil ? 10000 : 0));
    CHECK(r.timings[1].issue_end_ns == (gil ? 20000 : 10000));
  }
}

TEST_CASE("CPU cores are a FIFO resource", "[sim][host]") {
  sim::FifoResource cores(2);
  CHECK(cores.acquire(0));
  CHECK(cores.acquire(1));
  CHECK_FALSE(cores.acquire(2));  // queued
  CHECK_FALSE(cores.acquire(3));
  CHECK(cores.release() == 2);  // handed to the first waiter
  CHECK(cores.release() == 3);
  CHECK(cores.release() == -1);
  CHECK(cores.acquire(4));
}

TEST_CASE("a collective moves data only once every member has arrived", "[sim][collective]") {
  const Scenario s = two_gpu_scenario();
  Program p = skeleton(2, false);
  p.groups.push_back({0, {0, 1}, "world"});
  // GPU 1 first runs a long kernel; the all-reduce on GPU 0 must wait for it.
  add_kernel(p, 1, 1, 1e12, 0, 0);
  const double bytes = 64.0 * kMiB;
  for (int g = 0; g < 2; ++g) {
    Op op;
    op.id = static_cast<OpId>(p.ops.size());
    op.kind = OpKind::kCollective;
    op.name = p.names.intern("ar");
    op.thread = g;
    op.stream = g;
    op.gpu = g;
    op.collective = CollectiveKind::kAllReduce;
    op.group = 0;
    op.instance = 0;
    op.bytes = static_cast<Bytes>(bytes);
    p.ops.push_back(op);
  }
  p.collective_instances = 1;
  REQUIRE(validate_program(p).empty());
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, {});
  const Topology topo(s.cluster);
  const TransferPlan plan = plan_collective(topo, CommParams{}, CollectiveKind::kAllReduce,
                                            CollectiveAlgo::kAuto, {0, 1}, -1, bytes);
  // GPU 0's kernel starts at launch latency (4 us) and spins; GPU 1's starts after the 1e12 FLOP
  // kernel; both end together, the uncontended plan time after the later arrival.
  const TimeNs late = r.timings[0].end_ns;
  CHECK(r.timings[1].start_ns == 4000);
  CHECK(r.timings[2].start_ns == late);
  CHECK(r.timings[1].end_ns == r.timings[2].end_ns);
  CHECK(r.timings[2].end_ns - late == Approx(static_cast<double>(plan.predicted_ns)).margin(2));
}

TEST_CASE("host waits block the thread until the dependency finished", "[sim]") {
  const Scenario s = two_gpu_scenario();
  Program p = skeleton(1, true);
  const OpId k = add_kernel(p, 0, 0, 1e12, 0, 1000);
  Op sync;
  sync.id = 1;
  sync.kind = OpKind::kMarker;
  sync.name = p.names.intern("sync");
  sync.thread = 0;
  sync.deps = {{k, DepKind::kHostWaits}};
  p.ops.push_back(sync);
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, {});
  // the marker is reached only when the kernel ends
  CHECK(r.timings[1].ready_ns == r.timings[0].end_ns);
  CHECK(r.timings[1].end_ns == r.timings[0].end_ns);
}

TEST_CASE("kernels run on the SMs NCCL leaves, re-rated when an NCCL kernel starts or ends",
          "[sim][interference]") {
  // docs/cost-model.md, "Resource sharing": an A100 has 108 SMs and NCCL's
  // collective holds nccl_sms = 16 of them, so while it runs a kernel progresses at 92 / 108 of
  // its speed alone (factor f = 108 / 92 on its duration), and at full speed again once it ends.
  // GPU 0's all-reduce starts at 4 us (launch latency) and spins until the transfer ends; GPU 0's
  // kernel starts at 5 us (1 us of dispatch first). GPU 1's kernel and all-reduce both start at
  // 4 us. The all-reduce (1 MiB) ends at T, long before the 1e12-FLOP kernels (d0 ~ 0.1 s), so
  // each kernel started at t0 ends at T + llround(d0 - (T - t0) / f): its model time left after
  // running (T - t0) at factor f, then at factor 1.
  const Scenario s = two_gpu_scenario();
  REQUIRE(s.cluster.gpu.sm_count == 108);
  REQUIRE(s.cluster.gpu.nccl_sms == 16);
  Program p = skeleton(2, false);
  p.streams.push_back({2, 0, StreamRole::kComm, "nccl"});
  p.streams.push_back({3, 1, StreamRole::kComm, "nccl"});
  p.groups.push_back({0, {0, 1}, "world"});
  auto add_allreduce = [&](int g) {
    Op op;
    op.id = static_cast<OpId>(p.ops.size());
    op.kind = OpKind::kCollective;
    op.name = p.names.intern("ar");
    op.thread = g;
    op.stream = 2 + g;
    op.gpu = g;
    op.collective = CollectiveKind::kAllReduce;
    op.group = 0;
    op.instance = 0;
    op.bytes = 1 << 20;
    p.ops.push_back(op);
    return op.id;
  };
  const OpId ar0 = add_allreduce(0);
  const OpId k0 = add_kernel(p, 0, 0, 1e12, 0, 1000);
  const OpId k1 = add_kernel(p, 1, 1, 1e12, 0, 0);
  const OpId ar1 = add_allreduce(1);
  p.collective_instances = 1;
  REQUIRE(validate_program(p).empty());
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, {});
  const TimeNs d0 = compute_duration_ns(s.cluster.gpu, ComputeKind::kGemm, Dtype::kFp32, 1e12, 0);
  const double f = 108.0 / 92.0;
  const TimeNs t_end = r.timings[ar0].end_ns;
  CHECK(r.timings[ar1].end_ns == t_end);
  CHECK(r.timings[ar0].start_ns == 4000);
  CHECK(r.timings[k0].start_ns == 5000);
  CHECK(r.timings[k1].start_ns == 4000);
  REQUIRE(t_end < 5000 + static_cast<TimeNs>(static_cast<double>(d0) / 2));
  for (const OpId k : {k0, k1}) {
    const TimeNs t0 = r.timings[k].start_ns;
    const double left = static_cast<double>(d0) - static_cast<double>(t_end - t0) / f;
    CHECK(r.timings[k].end_ns == t_end + static_cast<TimeNs>(std::llround(left)));
  }
  // Slower than alone (d0), faster than slowed throughout (d0 x f).
  CHECK(r.timings[k0].end_ns - r.timings[k0].start_ns > d0);
  CHECK(r.timings[k0].end_ns - r.timings[k0].start_ns <
        static_cast<TimeNs>(std::llround(static_cast<double>(d0) * f)));
}
