// The CUDA runtime in multi-process launch modes (processes, mpi), as far as it is decided without
// a GPU: which CUDA device a process's GPU runs on, which NCCL ranks of each communicator group a
// process holds, and what a process that cannot reach another's GPUs refuses. [cuda] tests: no
// GPU needed.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_plan.hpp"
#include "backends/real/device_runtime.hpp"
#include "core/program/program.hpp"
#include "tests/cuda/op_fixture.hpp"

using namespace csim;
using core::CollectiveKind;
using core::Op;
using core::OpKind;
using core::Program;

namespace {

// DDP on `nodes` x `per_node` GPUs: one process and one thread per GPU, a compute and an nccl
// stream per GPU, and the gradient all-reduce of the "world" group; GPU g's op moves
// (g + 1) x 16 MiB, so the members disagree on the bytes.
Program ddp_program(int nodes, int per_node) {
  Program p;
  p.strategy_label = "ddp";
  p.world_gpus = nodes * per_node;
  p.gpus_per_node = per_node;
  p.steps = 1;
  core::CommGroup world{0, {}, "world"};
  for (int g = 0; g < p.world_gpus; ++g) {
    p.active_gpus.push_back(g);
    world.gpus.push_back(g);
    p.processes.push_back({g, g / per_node, "rank " + std::to_string(g), true});
    p.threads.push_back({g, g, g, "main"});
    p.streams.push_back({2 * g, g, core::StreamRole::kCompute, "compute"});
    p.streams.push_back({2 * g + 1, g, core::StreamRole::kComm, "nccl"});
  }
  p.groups.push_back(world);
  for (int g = 0; g < p.world_gpus; ++g) {
    Op& op = test::add_op(p, OpKind::kCollective, "allreduce", g, 2 * g + 1, g);
    op.collective = CollectiveKind::kAllReduce;
    op.group = 0;
    op.instance = 0;
    op.bytes = (g + 1) * 16 * kMiB;
  }
  p.collective_instances = 1;
  return p;
}

std::string unavailable(const std::function<void()>& f) {
  try {
    f();
  } catch (const BackendUnavailable& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("cuda_devices: a process's GPUs on this machine's CUDA devices", "[cuda][plan]") {
  // The cluster fits on this machine: device = GPU index, so the processes of a run on one
  // machine never share a device. A DDP rank driving only GPU 3 of a 4-GPU node runs on device 3.
  CHECK(cuda::cuda_devices({3}, 4, 4, 4) == std::vector<int>{3});
  CHECK(cuda::cuda_devices({0, 1}, 8, 8, 8) == std::vector<int>{0, 1});
  // Two nodes of 4 on a 4-device machine (one machine per node): device = GPU % 4.
  CHECK(cuda::cuda_devices({5}, 8, 4, 4) == std::vector<int>{1});
  CHECK(cuda::cuda_devices({4, 5, 6, 7}, 8, 4, 4) == std::vector<int>{0, 1, 2, 3});
  // Threads mode using 2 of an 8-GPU node on a 2-device machine: 0 % 8, 1 % 8.
  CHECK(cuda::cuda_devices({0, 1}, 8, 8, 2) == std::vector<int>{0, 1});
  // One process driving GPUs of two nodes (gpus_per_node 1, the default): devices in order.
  CHECK(cuda::cuda_devices({0, 1}, 4, 1, 2) == std::vector<int>{0, 1});

  // GPU 3 of a 4-GPU node (cluster of 8) on a 2-device machine needs device 3.
  const std::string few = unavailable([] { cuda::cuda_devices({3}, 8, 4, 2); });
  INFO(few);
  CHECK(few.find("GPU 3 runs on CUDA device 3") == 0);
  CHECK(few.find("2 CUDA device(s) exist here") != std::string::npos);
  CHECK(few.find('\n') == std::string::npos);
  CHECK(unavailable([] {
          cuda::cuda_devices({0, 1}, 2, 1, 1);
        }).find("needs 2 GPUs in this process") != std::string::npos);
}

TEST_CASE("plan_group: the NCCL ranks a process holds in a group", "[cuda][plan]") {
  const core::CommGroup group{0, {0, 1, 2, 3}, "world"};
  // This process drives GPUs 2 and 3, in slots 1 and 0: ranks 2 and 3 of 4, ranks in group order.
  std::vector<int> slot_of_gpu = {-1, -1, 1, 0};
  const cuda::GroupPlan g = cuda::plan_group(group, slot_of_gpu);
  CHECK(g.nranks == 4);
  CHECK(g.ranks == std::vector<int>{2, 3});
  CHECK(g.slots == std::vector<int>{1, 0});
  CHECK(g.spans_processes);
  CHECK(g.local_index(3) == 1);
  CHECK(g.local_index(0) == -1);
  // Every member here: ncclCommInitAll's case.
  const cuda::GroupPlan all = cuda::plan_group(group, {0, 1, 2, 3});
  CHECK_FALSE(all.spans_processes);
  CHECK(all.ranks == std::vector<int>{0, 1, 2, 3});
  // A GPU past the end of the map is another process's.
  CHECK(cuda::plan_group({1, {0, 7}, "pair"}, {0}).ranks == std::vector<int>{0});
  CHECK(unavailable([&] {
          cuda::plan_group({2, {0, 2, 0}, "dup"}, slot_of_gpu);
        }).find("lists GPU 0 twice") != std::string::npos);
  CHECK(unavailable([&] {
          cuda::plan_group({3, {0, 1}, "far"}, slot_of_gpu);
        }).find("has no GPU in this process") != std::string::npos);
}

TEST_CASE("plan: one DDP rank per process holds one NCCL rank of the group", "[cuda][plan]") {
  const Program p = ddp_program(1, 4);
  REQUIRE(core::validate_program(p).empty());
  const cuda::ProcessPlan plan = cuda::plan_process(p, {2}, 4, /*shared_nccl_ids=*/true);
  CHECK(plan.cuda_device == std::vector<int>{2});
  CHECK(plan.local_ops == 1);
  REQUIRE(plan.groups.size() == 1);
  const cuda::GroupPlan& g = plan.groups[0];
  CHECK(g.nranks == 4);
  CHECK(g.ranks == std::vector<int>{2});
  CHECK(g.slots == std::vector<int>{0});
  CHECK(g.spans_processes);
  // The warm-up chunk is the largest over every member's op, not only this process's 48 MiB:
  // GPU 3's (3 + 1) x 16 MiB = 64 MiB, so all four processes warm up the same all-reduce.
  CHECK(g.chunks.at(CollectiveKind::kAllReduce) == 64 * kMiB);
  CHECK(plan.devices[0].scratch_region_bytes == 64 * kMiB);
  CHECK(plan.batches.empty());

  // Without a launcher sharing NCCL ids the group cannot be built: one line naming it.
  const std::string no_ids = unavailable([&] { cuda::plan_process(p, {2}, 4); });
  INFO(no_ids);
  CHECK(no_ids.find("group 'world' has GPU 0 in another process") == 0);
  CHECK(no_ids.find("CudaOptions::shared_nccl_id") != std::string::npos);
  CHECK(no_ids.find('\n') == std::string::npos);
  // The rank of GPU 6 on the second node of 2 x 4, on a machine of 4 devices: device 6 % 4.
  const Program two_nodes = ddp_program(2, 4);
  CHECK(cuda::plan_process(two_nodes, {6}, 4, true).cuda_device == std::vector<int>{2});
}

TEST_CASE("plan: groups in ascending id, whatever order this process meets them", "[cuda][plan]") {
  // Two groups on GPUs {0, 1}; this process (GPU 0) issues group 1's op before group 0's. Every
  // process must build and warm up its communicators in one order, or two could wait on each
  // other in different groups.
  Program p = ddp_program(1, 2);
  p.groups.push_back({1, {0, 1}, "pair"});
  p.ops[0].group = 1;
  p.ops[1].group = 1;
  for (int g = 0; g < 2; ++g) {
    Op& op = test::add_op(p, OpKind::kCollective, "allreduce", g, 2 * g + 1, g);
    op.collective = CollectiveKind::kAllReduce;
    op.group = 0;
    op.instance = 1;
    op.bytes = kMiB;
  }
  p.collective_instances = 2;
  REQUIRE(core::validate_program(p).empty());
  const cuda::ProcessPlan plan = cuda::plan_process(p, {0}, 2, true);
  REQUIRE(plan.groups.size() == 2);
  CHECK(plan.groups[0].group == 0);
  CHECK(plan.groups[1].group == 1);
  CHECK(plan.group_plan_of == std::vector<int>{0, 1});
}

TEST_CASE("plan: one thread issuing two local members of a group spanning processes",
          "[cuda][plan]") {
  // 4 GPUs, this process drives GPUs 0 and 1 from one thread (thread 0 issues both ops): the two
  // are one batch, launched in one NCCL group on this process's two communicators.
  Program p = ddp_program(1, 4);
  p.ops[1].thread = 0;
  REQUIRE(core::validate_program(p).empty());
  const cuda::ProcessPlan plan = cuda::plan_process(p, {0, 1}, 4, true);
  REQUIRE(plan.groups.size() == 1);
  CHECK(plan.groups[0].ranks == std::vector<int>{0, 1});
  CHECK(plan.groups[0].spans_processes);
  REQUIRE(plan.batches.size() == 1);
  CHECK(plan.batches[0].ops == std::vector<core::OpId>{0, 1});
}

TEST_CASE("plan: a peer copy from another process's GPU is BackendUnavailable", "[cuda][plan]") {
  Program p = ddp_program(1, 2);
  Op& copy = test::add_op(p, OpKind::kCopy, "from GPU 1", 0, 0, 0);
  copy.copy_kind = core::CopyKind::kPeer;
  copy.peer_gpu = 1;
  copy.bytes = kMiB;
  const std::string m = unavailable([&] { cuda::plan_process(p, {0}, 2, true); });
  INFO(m);
  CHECK(m.find("op 2 'from GPU 1' copies from GPU 1, which another process drives") == 0);
}
