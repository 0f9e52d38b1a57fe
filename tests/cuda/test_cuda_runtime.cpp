// The CUDA DeviceRuntime (backends/cuda/). [cuda] tests need no GPU: the planning that open() does,
// and make_cuda_runtime() reporting "no usable GPU" as DeviceUnavailable (or opening one where a
// GPU exists). [gpu] tests run small Programs on real GPUs; without one they print
// "SKIPPED: <why>" and exit 77, which CTest reports as skipped (Catch2 2.13 has no SKIP).
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "backends/cuda/cuda_plan.hpp"
#include "backends/cuda/cuda_runtime.hpp"
#include "core/program.hpp"
#include "tests/cuda/op_fixture.hpp"

using namespace csim;
using core::CollectiveKind;
using core::CopyKind;
using core::Op;
using core::OpKind;
using core::Program;

namespace {

using test::skip;

// A runtime on `min_devices` CUDA devices, or the process exits 77 (skipped).
std::unique_ptr<real::DeviceRuntime> runtime_or_skip(int min_devices = 1) {
  try {
    auto rt = cuda::make_cuda_runtime();
    int count = 0;
    cudaGetDeviceCount(&count);
    if (count < min_devices) {
      skip("needs " + std::to_string(min_devices) + " CUDA devices, " + std::to_string(count) +
           " here");
    }
    return rt;
  } catch (const real::DeviceUnavailable& e) {
    skip(e.what());
  }
}

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One process, one host thread per GPU, and three streams per GPU: compute (3g), comm (3g + 1),
// copy (3g + 2).
Program base_program(int n_gpus) {
  Program p;
  p.strategy_label = "cuda runtime test";
  p.world_gpus = n_gpus;
  p.gpus_per_node = n_gpus;
  p.steps = 1;
  p.processes.push_back({0, 0, "test", false});
  for (int g = 0; g < n_gpus; ++g) {
    p.active_gpus.push_back(g);
    p.threads.push_back({g, 0, g, "main " + std::to_string(g)});
    p.streams.push_back({3 * g, g, core::StreamRole::kCompute, "compute"});
    p.streams.push_back({3 * g + 1, g, core::StreamRole::kComm, "nccl"});
    p.streams.push_back({3 * g + 2, g, core::StreamRole::kCopy, "copy"});
  }
  return p;
}

int compute_stream(int gpu) {
  return 3 * gpu;
}
int comm_stream(int gpu) {
  return 3 * gpu + 1;
}
int copy_stream(int gpu) {
  return 3 * gpu + 2;
}

using csim::test::add_op;

Op& add_collective(Program& p, CollectiveKind kind, int group, int instance, int thread, int gpu,
                   Bytes bytes) {
  Op& op = add_op(p, OpKind::kCollective, core::to_string(kind), thread, comm_stream(gpu), gpu);
  op.collective = kind;
  op.group = group;
  op.instance = instance;
  op.bytes = bytes;
  return op;
}

// The GEMM of 2·1024³ FLOPs and the 64 MiB element-wise op on GPU 0's compute stream.
Program gemm_then_elementwise() {
  Program p = base_program(1);
  Op& gemm = add_op(p, OpKind::kCompute, "fc.fwd", 0, compute_stream(0), 0);
  gemm.compute_kind = core::ComputeKind::kGemm;
  gemm.dtype = core::Dtype::kFp32;
  gemm.flops = 2.0 * 1024 * 1024 * 1024;
  Op& relu = add_op(p, OpKind::kCompute, "relu.fwd", 0, compute_stream(0), 0);
  relu.compute_kind = core::ComputeKind::kElementwise;
  relu.bytes = 64 * kMiB;
  return p;
}

// Two GPUs: an all-reduce whose ops two threads issue, then a broadcast whose two ops thread 0
// issues (DataParallel's replicate), then a peer copy.
Program two_gpu_program() {
  Program p = base_program(2);
  p.groups.push_back({0, {0, 1}, "world"});
  add_collective(p, CollectiveKind::kAllReduce, 0, 0, 0, 0, 64 * kMiB);
  add_collective(p, CollectiveKind::kAllReduce, 0, 0, 1, 1, 64 * kMiB);
  add_collective(p, CollectiveKind::kBroadcast, 0, 1, 0, 0, 32 * kMiB).root = 0;
  add_collective(p, CollectiveKind::kBroadcast, 0, 1, 0, 1, 32 * kMiB).root = 0;
  p.ops[3].deps = {{1, core::DepKind::kStreamWaits}};
  Op& peer = add_op(p, OpKind::kCopy, "to GPU 1", 0, copy_stream(1), 1);
  peer.copy_kind = CopyKind::kPeer;
  peer.peer_gpu = 0;
  peer.bytes = 300 * kMiB;
  p.collective_instances = 2;
  return p;
}

}  // namespace

TEST_CASE("make_cuda_runtime: DeviceUnavailable without a GPU, a runtime with one", "[cuda]") {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  cudaGetLastError();
  const std::string probe = cuda::cuda_probe_line();
  INFO(probe);
  if (e != cudaSuccess || count == 0) {
    std::string message;
    try {
      cuda::make_cuda_runtime();
    } catch (const real::DeviceUnavailable& ex) {
      message = ex.what();
    }
    CHECK(message.find("no usable CUDA GPU") == 0);
    CHECK(message.find("cudaGetDeviceCount") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    CHECK(probe == message);
  } else {
    std::unique_ptr<real::DeviceRuntime> rt;
    REQUIRE_NOTHROW(rt = cuda::make_cuda_runtime());
    const real::RuntimeInfo info = rt->info();
    CHECK(info.backend == "cuda");
    CHECK(info.measured);
    for (const char* key : {"gpu_name", "compute_capability", "driver_version", "runtime_version",
                            "nccl_version", "cublas_version", "device_count"}) {
      CHECK(info.metadata.count(key) == 1);
    }
    CHECK(probe.find(" CUDA device(s): ") != std::string::npos);
  }
}

TEST_CASE("plan: square GEMMs whose FLOPs add up to the op's", "[cuda][plan]") {
  CHECK(cuda::max_gemm_size(4, cuda::kMaxBufferBytes) == 8192);
  CHECK(cuda::max_gemm_size(2, cuda::kMaxBufferBytes) == 11584);
  CHECK(cuda::plan_gemm_sizes(2.0 * 1024 * 1024 * 1024, 8192) == std::vector<std::int64_t>{1024});
  CHECK(cuda::plan_gemm_sizes(10.0, 8192) == std::vector<std::int64_t>{64});  // at least 64
  CHECK(cuda::plan_gemm_sizes(0.0, 8192).empty());
  // 3.5 GEMMs of the largest size: three of 8192, then one for the rest.
  const double full = 2.0 * 8192.0 * 8192.0 * 8192.0;
  const std::vector<std::int64_t> sizes = cuda::plan_gemm_sizes(3.5 * full, 8192);
  REQUIRE(sizes.size() == 4);
  double flops = 0;
  for (std::int64_t n : sizes) {
    CHECK(n % cuda::kGemmAlign == 0);
    CHECK(n <= 8192);
    flops += 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  }
  CHECK(flops == Approx(3.5 * full).epsilon(0.01));
}

TEST_CASE("plan: buffers, communicators and one-thread collective batches", "[cuda][plan]") {
  Program p = two_gpu_program();
  REQUIRE(core::validate_program(p).empty());
  const cuda::ProcessPlan plan = cuda::plan_process(p, {0, 1}, 2);
  CHECK(plan.local_ops == 5);
  REQUIRE(plan.groups.size() == 1);
  CHECK(plan.groups[0].slots == std::vector<int>{0, 1});
  CHECK(plan.groups[0].ranks == std::vector<int>{0, 1});
  CHECK_FALSE(plan.groups[0].spans_processes);
  // The broadcast (instance 1) is issued by thread 0 for both GPUs: one batch; the all-reduce's
  // ops come from two threads and are issued one by one.
  REQUIRE(plan.batches.size() == 1);
  CHECK(plan.batches[0].instance == 1);
  CHECK(plan.batches[0].ops == std::vector<core::OpId>{2, 3});
  CHECK(plan.batch_of_op[0] == -1);
  CHECK(plan.batch_of_op[3] == 0);
  // 300 MiB peer copy: both ends hold a capped region; the copy repeats in chunks.
  CHECK(plan.devices[0].scratch_region_bytes == cuda::kMaxBufferBytes);
  CHECK(plan.devices[1].scratch_region_bytes == cuda::kMaxBufferBytes);
  CHECK(cuda::chunk_count(300 * kMiB, cuda::kMaxBufferBytes) == 2);
  CHECK(plan.devices[0].gemm_operand_bytes == 0);

  const Program g = gemm_then_elementwise();
  const cuda::ProcessPlan one = cuda::plan_process(g, {0}, 1);
  CHECK(one.devices[0].gemm_operand_bytes == 1024 * 1024 * 4);
  CHECK(one.devices[0].scratch_region_bytes == 32 * kMiB);
  CHECK(one.gemm_stream[static_cast<std::size_t>(compute_stream(0))] == 1);
}

TEST_CASE("plan: what one process cannot run is DeviceUnavailable", "[cuda][plan]") {
  const Program p = two_gpu_program();
  const auto message = [&](const std::vector<int>& gpus, int devices) {
    try {
      cuda::plan_process(p, gpus, devices);
    } catch (const real::DeviceUnavailable& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message({0, 1}, 1).find("needs 2 GPUs in this process") != std::string::npos);
  // GPU 1 is in another process and no launcher shares NCCL ids (CudaOptions::shared_nccl_id).
  CHECK(message({0}, 8).find("group 'world' has GPU 1 in another process") == 0);
  CHECK(message({0, 0}, 8).find("listed twice") != std::string::npos);
  Program sym = p;
  sym.symmetry.images = {{0, 1}};
  sym.symmetry.weight_of_gpu = {1, 1};
  try {
    cuda::plan_process(sym, {0, 1}, 2);
    FAIL("a rank-symmetric program was accepted");
  } catch (const real::DeviceUnavailable& e) {
    CHECK(std::string(e.what()).find("full-fidelity") != std::string::npos);
  }
}

TEST_CASE("a GEMM then an element-wise op on one stream run in order", "[gpu]") {
  auto rt = runtime_or_skip();
  const Program p = gemm_then_elementwise();
  REQUIRE(core::validate_program(p).empty());
  rt->open(p, {0}, steady_now_ns());
  rt->enqueue(p.ops[0], {});
  rt->enqueue(p.ops[1], {});
  rt->finish();
  TimeNs s0 = -1, e0 = -1, s1 = -1, e1 = -1;
  REQUIRE(rt->op_interval(0, &s0, &e0));
  REQUIRE(rt->op_interval(1, &s1, &e1));
  INFO("gemm " << s0 << ".." << e0 << " ns, element-wise " << s1 << ".." << e1 << " ns");
  CHECK(s0 >= 0);
  CHECK(e0 > s0);
  CHECK(s1 >= e0);
  CHECK(e1 > s1);
  CHECK(rt->info().backend == "cuda");
}

TEST_CASE("GEMMs in every dtype, and one above the operand cap, run", "[gpu]") {
  auto rt = runtime_or_skip();
  Program p = base_program(1);
  const double n4096 = 2.0 * 4096 * 4096 * 4096;
  const std::pair<core::Dtype, double> gemms[] = {
      {core::Dtype::kFp16, n4096},
      {core::Dtype::kBf16, n4096},
      {core::Dtype::kTf32, n4096},
      {core::Dtype::kFp32, 2.5 * 2.0 * 8192 * 8192 * 8192}};
  for (const auto& [dtype, flops] : gemms) {
    Op& g = add_op(p, OpKind::kCompute, core::to_string(dtype), 0, compute_stream(0), 0);
    g.compute_kind = core::ComputeKind::kAttention;
    g.dtype = dtype;
    g.flops = flops;
  }
  REQUIRE(core::validate_program(p).empty());
  rt->open(p, {0}, steady_now_ns());
  for (const Op& op : p.ops) rt->enqueue(op, {});
  rt->finish();
  for (const Op& op : p.ops) {
    TimeNs s = -1, e = -1;
    REQUIRE(rt->op_interval(op.id, &s, &e));
    INFO(op.name << ": " << (e - s) << " ns");
    CHECK(e > s);
  }
}

TEST_CASE("copies, stream-ordered alloc / free and host_wait on one GPU", "[gpu]") {
  auto rt = runtime_or_skip();
  Program p = base_program(1);
  Op& a = add_op(p, OpKind::kAlloc, "input", 0, compute_stream(0), 0);
  a.bytes = 256 * kMiB;
  const std::pair<CopyKind, Bytes> copies[] = {{CopyKind::kH2DPinned, 64 * kMiB},
                                               {CopyKind::kH2DPageable, 300 * kMiB},
                                               {CopyKind::kD2H, 64 * kMiB},
                                               {CopyKind::kD2D, 64 * kMiB}};
  for (const auto& [kind, bytes] : copies) {
    Op& c = add_op(p, OpKind::kCopy, core::to_string(kind), 0, copy_stream(0), 0);
    c.copy_kind = kind;
    c.bytes = bytes;
  }
  Op& f = add_op(p, OpKind::kFree, "input", 0, compute_stream(0), 0);
  f.bytes = 256 * kMiB;
  f.deps = {{4, core::DepKind::kStreamWaits}};
  REQUIRE(core::validate_program(p).empty());
  rt->open(p, {0}, steady_now_ns());
  for (const Op& op : p.ops) {
    std::vector<core::OpId> deps;
    for (const core::Dep& d : op.deps) deps.push_back(d.op);
    rt->enqueue(op, deps);
  }
  rt->host_wait(3);
  rt->finish();
  TimeNs prev_end = 0;
  for (core::OpId id = 1; id <= 4; ++id) {  // the copies, in order on the copy stream
    TimeNs s = -1, e = -1;
    REQUIRE(rt->op_interval(id, &s, &e));
    CHECK(e > s);
    CHECK(s >= prev_end);
    prev_end = e;
  }
  TimeNs s = -1, e = -1;
  REQUIRE(rt->op_interval(5, &s, &e));
  CHECK(s >= prev_end);  // the free waited for the D2D copy
}

TEST_CASE("an allocation larger than the GPU is a DeviceError naming the op", "[gpu]") {
  auto rt = runtime_or_skip();
  Program p = base_program(1);
  Op& a = add_op(p, OpKind::kAlloc, "huge activations", 0, compute_stream(0), 0);
  a.bytes = Bytes{1} << 50;  // 1 PiB
  rt->open(p, {0}, steady_now_ns());
  std::string message;
  try {
    rt->enqueue(p.ops[0], {});
  } catch (const real::DeviceError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("out of memory") != std::string::npos);
  CHECK(message.find("op 0 'huge activations'") != std::string::npos);
  CHECK(message.find("GPU 0") != std::string::npos);
  CHECK(message.find(std::to_string(Bytes{1} << 50)) != std::string::npos);
}

TEST_CASE("NCCL across two GPUs: per-thread all-reduce, one-thread broadcast, peer copy", "[gpu]") {
  auto rt = runtime_or_skip(2);
  const Program p = two_gpu_program();
  REQUIRE(core::validate_program(p).empty());
  rt->open(p, {0, 1}, steady_now_ns());
  // The all-reduce: each GPU's thread enqueues its own op, concurrently.
  std::thread t0([&] { rt->enqueue(p.ops[0], {}); });
  std::thread t1([&] { rt->enqueue(p.ops[1], {}); });
  t0.join();
  t1.join();
  // The broadcast: thread 0 enqueues both ops; the runtime launches them together.
  rt->enqueue(p.ops[2], {});
  rt->enqueue(p.ops[3], {1});
  rt->enqueue(p.ops[4], {});
  rt->finish();
  TimeNs s[5], e[5];
  for (int i = 0; i < 5; ++i) {
    REQUIRE(rt->op_interval(i, &s[i], &e[i]));
    CHECK(e[i] > s[i]);
  }
  CHECK(s[2] >= e[0]);  // same stream (GPU 0's nccl)
  CHECK(s[3] >= e[1]);  // same stream (GPU 1's nccl)
}

TEST_CASE("every collective kind on two GPUs, each GPU's op from its own thread", "[gpu]") {
  auto rt = runtime_or_skip(2);
  Program p = base_program(2);
  p.groups.push_back({0, {0, 1}, "world"});
  const CollectiveKind kinds[] = {
      CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
      CollectiveKind::kBroadcast, CollectiveKind::kReduce,        CollectiveKind::kScatter,
      CollectiveKind::kGather,    CollectiveKind::kAllToAll,      CollectiveKind::kSendRecv};
  int instance = 0;
  for (CollectiveKind kind : kinds) {
    for (int g = 0; g < 2; ++g) add_collective(p, kind, 0, instance, g, g, 300 * kMiB).root = 1;
    ++instance;
  }
  p.collective_instances = instance;
  REQUIRE(core::validate_program(p).empty());
  rt->open(p, {0, 1}, steady_now_ns());
  const auto issue = [&](int gpu) {
    for (const Op& op : p.ops) {
      if (op.gpu == gpu) rt->enqueue(op, {});
    }
  };
  std::thread t0(issue, 0);
  std::thread t1(issue, 1);
  t0.join();
  t1.join();
  rt->finish();
  for (const Op& op : p.ops) {
    TimeNs s = -1, e = -1;
    REQUIRE(rt->op_interval(op.id, &s, &e));
    INFO(op.name << " on GPU " << op.gpu << ": " << (e - s) << " ns");
    CHECK(e > s);
  }
}
