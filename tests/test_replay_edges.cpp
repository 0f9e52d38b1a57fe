// simrun replay: the edges that make a step follow its collectives, collective sizes and groups
// inferred from the CPU ops, and [memory] events replayed (docs/replay.md, "Edges",
// "Collectives", "Memory"). Synthetic Kineto traces (tests/replay_trace_support.hpp), times in µs;
// every expected value is derived beside its check.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "replay/collective_info.hpp"
#include "replay/collective_recost.hpp"
#include "tests/replay_trace_support.hpp"

using namespace csim;
using namespace csim::test;
using replay::Stat;

namespace {

const char* const kNccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// One step [0, 400] on rank 0 of 2. An all-reduce of 1 Mi floats (4 MiB, Group size 2) is
// launched at 10 and runs [20, 120] on stream 20; a wait for it (`wait`: the events that stand
// for it) at 40; a kernel launched at 130 runs [140, 160] on stream 7 (launch latency 10 µs, as
// the all-reduce's: it was not held back, the all-reduce had ended); cudaDeviceSynchronize
// [150, 162] returns 2 µs after it; Python to 400.
std::string collective_step(const std::vector<std::string>& wait) {
  std::vector<std::string> e = {
      step(1, 0, 400),
      ev("cpu_op", "c10d::allreduce_", 100, 100, 8, 12),
      ev("cpu_op", "record_param_comms", 100, 100, 9, 10,
         R"("Collective name":"allreduce","In msg nelems":1048576,"Out msg nelems":1048576,)"
         R"("dtype":"Float","Group size":2,"Process Group Ranks":"[0, 1]")"),
      launch(10, 5, 1),
      kernel(kNccl, 20, 20, 100, 1),
      launch(130, 5, 3),
      kernel("elementwise_kernel", 7, 140, 20, 3),
      launch(150, 12, 5, "cudaDeviceSynchronize")};
  e.insert(e.end(), wait.begin(), wait.end());
  std::string t = trace(e);
  t.insert(1, R"("distributedInfo":{"backend":"nccl","rank":0,"world_size":2},)");
  return t;
}

// Own cluster: exact. replay.dp_scale=2: the all-reduce over the job (2 -> 4 ranks) takes d';
// the kernel waits for it, so it starts at max(140, 20 + d'), the sync returns 2 µs after its
// end and the Python after it keeps its 238 µs: step = 400 + max(0, 20 + d' - 140) µs.
void check_step_follows(const std::string& name, const std::string& t, Stat edge) {
  const replay::ReplayOutcome own = run_replay(name, t);
  REQUIRE(own.steps.size() == 1);
  CHECK(own.steps[0].replayed_ns == 400 * kUs);
  CHECK(own.imported.stats.get(edge) == 1);
  const replay::ReplayOutcome dp2 = run_replay(name, t, {"replay.dp_scale=2"});
  const TimeNs d2 = collective_ns(dp2);
  // 4 MiB from 2 to 4 ranks on an A100 node: the bandwidth term x1.5, hops x3 (docs/replay.md).
  REQUIRE(d2 > 120 * kUs);  // long enough to be exposed
  CHECK(dp2.steps[0].replayed_ns == 400 * kUs + (20 * kUs + d2 - 140 * kUs));
}

}  // namespace

TEST_CASE("replay edges: a c10d wait makes the step follow the collective", "[replay]") {
  // cudaStreamWaitEvent at 40 outside the collective's own CPU ops (as DDP's finalize or
  // record_param_comms "wait"): the first GPU op its thread launches next waits for the last
  // collective launched before it (docs/replay.md, "Edges", collective waits).
  check_step_follows("cwait.json", collective_step({launch(40, 2, 2, "cudaStreamWaitEvent")}),
                     Stat::collective_waits);
  // The same call inside the collective's launch (syncStream before the kernel) is no wait.
  const replay::ReplayOutcome o =
      run_replay("cside.json", collective_step({ev("cpu_op", "c10d::broadcast_", 100, 100, 38, 6),
                                                launch(40, 2, 2, "cudaStreamWaitEvent")}));
  CHECK(o.imported.stats.get(Stat::collective_waits) == 0);
}

TEST_CASE("replay edges: cuda_sync names the event a stream waits for", "[replay]") {
  // Kineto's enable_cuda_sync_events: a "Stream Wait Event" record on the waiting stream (7)
  // names the cudaEventRecord (correlation 4, at 16, after the all-reduce's launch) and the stream
  // it recorded on (20): read, not inferred.
  const std::string sync =
      R"({"ph":"X","cat":"cuda_sync","name":"Stream Wait Event","pid":0,"tid":7,"ts":40,)"
      R"("dur":1,"args":{"cuda_sync_kind":"Stream Wait Event","wait_on_stream":20,)"
      R"("wait_on_cuda_event_record_corr_id":4,"wait_on_cuda_event_id":9,"stream":7,)"
      R"("correlation":2,"device":0}})";
  const std::string t = collective_step(
      {launch(16, 1, 4, "cudaEventRecord"), launch(40, 2, 2, "cudaStreamWaitEvent"), sync});
  check_step_follows("esync.json", t, Stat::event_waits);
  const replay::ReplayOutcome o = run_replay("esync.json", t);
  CHECK(o.imported.stats.get(Stat::cuda_sync_events) == 1);
  CHECK(o.imported.stats.get(Stat::collective_waits) == 0);  // read supersedes inferred
}

TEST_CASE("replay edges: without recorded waits the optimizer waits for the collectives",
          "[replay]") {
  // No cudaStreamWaitEvent in the trace (a filtered one): the first GPU op launched inside
  // Optimizer.step#SGD.step (125-170) waits for the last collective launched before it.
  check_step_follows(
      "optim.json",
      collective_step({ev("user_annotation", "Optimizer.step#SGD.step", 100, 100, 125, 45)}),
      Stat::optimizer_waits);
}

TEST_CASE("replay edges: cudaDeviceSynchronize waits for every stream", "[replay]") {
  // The sync at 150 waits for the kernel on stream 7 and the all-reduce on stream 20, the last
  // op of each stream launched before it (read: sync_reads). Another interconnect (2 ranks on 2
  // nodes over 10 Gb/s NICs instead of NVLink) makes the all-reduce d' > 140 µs, so the sync
  // returns at 20 + d' + 2 (measured: 2 µs after what it waited for) and the step is
  // 400 + (20 + d' + 2 - 162) µs.
  const std::string t = collective_step({});
  const replay::ReplayOutcome own = run_replay("dsync.json", t);
  CHECK(own.steps[0].replayed_ns == 400 * kUs);
  CHECK(own.imported.stats.get(Stat::sync_reads) == 1);
  const replay::ReplayOutcome net =
      run_replay("dsync.json", t, {"cluster.gpus_per_node=1", "cluster.nic_gbps=10"});
  const TimeNs d = collective_ns(net);
  REQUIRE(d > 140 * kUs);
  CHECK(net.steps[0].replayed_ns == 400 * kUs + (22 * kUs + d - 162 * kUs));
}

TEST_CASE("replay edges: a stream sync that did not block waits for the thread's last launch",
          "[replay]") {
  // cudaStreamSynchronize [170, 172], after everything ended: Kineto does not say which stream;
  // it synchronised the one the thread last launched on (the kernel's, 7): sync_last_launch.
  const replay::ReplayOutcome o =
      run_replay("ssync.json", collective_step({launch(170, 2, 6, "cudaStreamSynchronize")}));
  CHECK(o.steps[0].replayed_ns == 400 * kUs);
  CHECK(o.imported.stats.get(Stat::sync_last_launch) == 1);
}

TEST_CASE("replay collectives: sizes and groups inferred from the CPU ops", "[replay]") {
  using replay::Record;
  CHECK(replay::parse_dims("[[8,1024,8816]]") ==
        std::vector<std::vector<std::int64_t>>{{8, 1024, 8816}});
  CHECK(replay::parse_dims("[[], [3], []]") == std::vector<std::vector<std::int64_t>>{{}, {3}, {}});
  CHECK(replay::parse_dims("not dims").empty());
  CHECK(replay::kernel_type_bytes("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == 4);
  CHECK(replay::kernel_type_bytes("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == 2);
  CHECK(replay::kernel_type_bytes("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)") == 1);
  CHECK(replay::input_type_bytes("c10::BFloat16") == 2);
  CHECK(replay::input_type_bytes("long") == 8);
  // PyTorch 1.13-2.0: nccl:all_reduce with Input Dims [[45310188]] of float, no Group size: 4 x
  // 45310188 bytes over the world (8 ranks), both inferred.
  Record nccl;
  nccl.name = "nccl:all_reduce";
  nccl.input_dims = "[[45310188]]";
  nccl.input_types = R"(["float"])";
  replay::CollectiveInfo c = replay::collective_info({&nccl}, "ncclKernel_AllReduce", 8);
  CHECK(c.kind == core::CollectiveKind::kAllReduce);
  CHECK(c.bytes == 4 * 45310188L);
  CHECK(c.size_source == replay::SizeSource::kInputDims);
  CHECK(c.group_size == 8);
  CHECK(c.group_source == replay::GroupSource::kWorld);
  // An all-gather: c10d::_allgather_base_ lists [output, input]; the group is 2^30 / 2^24 = 64
  // (a subset of a 128-rank job) and the size the output's 2^30 bytes of int8.
  Record c10d;
  c10d.name = "c10d::_allgather_base_";
  c10d.input_dims = "[[1073741824],[16777216],[]]";
  c10d.input_types = R"(["signed char","signed char",""])";
  Record ag;
  ag.name = "nccl:_all_gather_base";
  ag.input_dims = "[[16777216]]";
  c = replay::collective_info({&ag, &c10d}, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", 128);
  CHECK(c.kind == core::CollectiveKind::kAllGather);  // from nccl:<op>, not the SendRecv kernel
  CHECK(c.group_size == 64);
  CHECK(c.group_source == replay::GroupSource::kAllGatherRatio);
  CHECK(c.bytes == 1073741824L);
  // record_param_comms is read first: Process Group Ranks give the group and its GPUs.
  Record rpc;
  rpc.name = "record_param_comms";
  rpc.collective_name = "allreduce";
  rpc.in_nelems = rpc.out_nelems = 1000;
  rpc.dtype = "BFloat16";
  rpc.pg_ranks = {0, 8};
  rpc.pg_name = "3";
  c = replay::collective_info({&rpc, &nccl}, "x", 16);
  CHECK(c.bytes == 2000);
  CHECK(c.size_source == replay::SizeSource::kRecordParamComms);
  CHECK(c.group_size == 2);
  CHECK(c.ranks == std::vector<int>{0, 8});
  CHECK(c.group_key == "pg 3");
}

TEST_CASE("replay collectives: an inferred size makes the collective re-costable", "[replay]") {
  // nccl:all_reduce of 1 Mi floats without record_param_comms' sizes, world 2: re-costable, and
  // on another interconnect (2 nodes) it moves.
  std::string t = trace({step(1, 0, 400),
                         ev("cpu_op", "nccl:all_reduce", 100, 100, 8, 10,
                            R"("Input Dims":[[1048576]],"Input type":["float"])"),
                         launch(10, 5, 1), kernel(kNccl, 20, 20, 100, 1)});
  t.insert(1, R"("distributedInfo":{"backend":"nccl","rank":0,"world_size":2},)");
  const replay::ReplayOutcome own = run_replay("inferred.json", t);
  CHECK(own.imported.stats.get(Stat::collectives_size_inferred) == 1);
  CHECK(own.imported.stats.get(Stat::collectives_group_world) == 1);
  CHECK(own.collectives_recosted == 1);
  CHECK(collective_ns(own) == 100 * kUs);  // own cluster: d' = d
  const core::Op& op =
      own.imported.program.ops[static_cast<std::size_t>(own.imported.gpu_ops[0].op)];
  CHECK(op.bytes == 4L << 20);
  const replay::ReplayOutcome net = run_replay("inferred.json", t, {"cluster.gpus_per_node=1"});
  CHECK(collective_ns(net) > 100 * kUs);
}

TEST_CASE("replay collectives: the data-parallel group may be a subset of the job", "[replay]") {
  // World 4. The gradient all-reduce (under AccumulateGrad) runs on process group "1", ranks
  // [0, 2]; another all-reduce on group "2", ranks [0, 1] (tensor-parallel). dp_scale=2 grows
  // the first to 4 ranks ([0, 2, 4, 6], its stride continued) and keeps the second at 2: on the
  // same cluster its d' = d.
  const std::string rpc1 =
      R"("Collective name":"allreduce","In msg nelems":1048576,"Out msg nelems":1048576,)"
      R"("dtype":"Float","Group size":2,"Process Group Name":"1","Process Group Ranks":[0,2])";
  const std::string rpc2 =
      R"("Collective name":"allreduce","In msg nelems":1048576,"Out msg nelems":1048576,)"
      R"("dtype":"Float","Group size":2,"Process Group Name":"2","Process Group Ranks":[0,1])";
  std::string t = trace(
      {step(1, 0, 600),
       ev("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 100,
          100, 5, 30),
       ev("cpu_op", "record_param_comms", 100, 100, 9, 10, rpc1), launch(10, 5, 1),
       kernel(kNccl, 20, 20, 100, 1), ev("cpu_op", "record_param_comms", 100, 100, 199, 10, rpc2),
       launch(200, 5, 2), kernel(kNccl, 21, 210, 100, 2)});
  t.insert(1, R"("distributedInfo":{"backend":"nccl","rank":0,"world_size":4},)");
  const replay::ReplayOutcome o = run_replay("dpsub.json", t, {"replay.dp_scale=2"});
  REQUIRE(o.imported.gpu_ops.size() == 2);
  CHECK(o.imported.gpu_ops[0].grad_hook);
  CHECK(o.imported.gpu_ops[0].group_key == "pg 1");
  CHECK(replay::data_parallel_groups(o.imported) == std::set<std::string>{"pg 1"});
  CHECK(o.imported.stats.get(Stat::collectives_group_read) == 2);
  const auto fixed = [&](std::size_t i) {
    return o.imported.program.ops[static_cast<std::size_t>(o.imported.gpu_ops[i].op)].fixed_ns;
  };
  CHECK(fixed(0) > 100 * kUs);   // 2 -> 4 ranks
  CHECK(fixed(1) == 100 * kUs);  // not data-parallel: kept
  CHECK(replay::group_gpus({0, 2}, 4, 16) == std::vector<int>{0, 2, 4, 6});
  CHECK(replay::group_gpus({0, 2}, 4, 5) == std::vector<int>{0, 1, 2, 3});  // past the world
}

TEST_CASE("replay memory: [memory] events become allocations and frees", "[replay]") {
  // Device 0 events in the window: +1 MiB (Total Allocated 11 MiB: 10 MiB before the window),
  // +2 (13), -1 (12), +4 (16), -6 (10); a CPU event (Device Type 0) is not replayed. Replayed in
  // order on the compute stream from the 10 MiB resident at the window's start: the peak is
  // 16 MiB, as measured.
  auto mem = [](double ts, long bytes, long total, int type = 1) {
    return R"({"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":100,"tid":100,)"
           R"("ts":)" +
           std::to_string(ts) + R"(,"args":{"Device Type":)" + std::to_string(type) +
           R"(,"Device Id":)" + std::to_string(type == 1 ? 0 : -1) + R"(,"Bytes":)" +
           std::to_string(bytes) + R"(,"Total Allocated":)" + std::to_string(total) + "}}";
  };
  const long mi = 1 << 20;
  const replay::ReplayOutcome o = run_replay(
      "mem.json",
      trace({step(1, 0, 200), launch(10, 5, 1), kernel("elementwise_kernel", 7, 20, 100, 1),
             mem(12, mi, 11 * mi), mem(30, 2 * mi, 13 * mi), mem(40, -mi, 12 * mi),
             mem(50, 4 * mi, 16 * mi), mem(60, -6 * mi, 10 * mi), mem(70, 64, 64, 0)}));
  CHECK(o.imported.stats.get(Stat::memory_replayed) == 5);
  CHECK(o.imported.stats.get(Stat::memory_other_device) == 1);
  REQUIRE(o.memory.size() == 1);
  CHECK(o.memory[0].measured_peak_bytes == 16 * mi);
  CHECK(o.memory[0].replayed_peak_bytes == 16 * mi);
  CHECK(o.steps[0].replayed_ns == 200 * kUs);  // allocations take no time
}

TEST_CASE("replay: the bundled example replays exactly, its stream waits read", "[replay]") {
  // traces/replay_example: simrun's own per-rank traces of a 2-GPU DDP run (README), with the
  // cuda_sync records our writer emits: every step replays at its measured time on its own GPU,
  // and the cross-stream waits are read from those records, not inferred.
  replay::ReplayRequest rq;
  rq.inputs = {std::string(CSIM_SOURCE_DIR) + "/traces/replay_example"};
  rq.sets = {"replay.source_gpu=GTX-1080-Ti"};
  const replay::ReplayOutcome o = replay::replay(rq);
  REQUIRE(o.imported.ranks.size() == 2);
  REQUIRE(o.steps.size() == 8);  // 4 steps x 2 ranks
  for (const replay::StepResult& s : o.steps) CHECK(s.replayed_ns == s.measured_ns);
  CHECK(o.imported.stats.get(Stat::event_waits) > 0);
  CHECK(o.imported.stats.errors() == 0);
}
