// The CUDA DeviceRuntime (backends/cuda/). [cuda] tests need no GPU: the planning that open() does,
// and make_cuda_runtime() reporting "no usable GPU" as BackendUnavailable (or opening one where a
// GPU exists). [gpu] tests run small Programs on real GPUs, [2gpu] ones on two; without a GPU they
// print "SKIPPED: <why>" and exit 77, which CTest reports as skipped (Catch2 2.13 has no SKIP),
// and a [2gpu] test on one GPU skips only itself (op_fixture.hpp).
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_plan.hpp"
#include "backends/cuda/cuda_runtime.hpp"
#include "backends/cuda/gemm_proxy.hpp"
#include "core/program/program.hpp"
#include "tests/cuda/op_fixture.hpp"

using namespace csim;
using core::CollectiveKind;
using core::CopyKind;
using core::Op;
using core::OpKind;
using core::Program;

namespace {

using test::skip;

// A runtime on `min_devices` CUDA devices. No GPU: the process exits 77 (skipped); too few: null,
// after a visible skip of this test (test::have_gpus), and the test returns.
std::unique_ptr<real::DeviceRuntime> runtime_or_skip(int min_devices = 1) {
  std::unique_ptr<real::DeviceRuntime> rt;
  try {
    rt = cuda::make_cuda_runtime();
  } catch (const BackendUnavailable& e) {
    skip(e.what());
  }
  if (!test::have_gpus(min_devices)) return nullptr;
  return rt;
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

TEST_CASE("make_cuda_runtime: BackendUnavailable without a GPU, a runtime with one", "[cuda]") {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  cudaGetLastError();
  const std::string probe = cuda::cuda_probe_line();
  INFO(probe);
  if (e != cudaSuccess || count == 0) {
    std::string message;
    try {
      cuda::make_cuda_runtime();
    } catch (const BackendUnavailable& ex) {
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

TEST_CASE("plan: GEMM shapes execute the op's FLOPs within 1 %", "[cuda][plan]") {
  // The largest aligned squares under the 256 MiB cap: sqrt(2^28 / 4) = 8192 (fp32), and
  // sqrt(2^28 / 2) = 11585.2 -> 181 * 64 = 11584 (fp16 / bf16).
  CHECK(cuda::max_gemm_size(4, cuda::kMaxBufferBytes) == 8192);
  CHECK(cuda::max_gemm_size(2, cuda::kMaxBufferBytes) == 11584);
  const auto shapes = [](double flops, int elem = 2) {
    return cuda::plan_gemm_shapes(flops, elem, cuda::kMaxBufferBytes);
  };
  using Shape = cuda::GemmShape;
  // A cube of an aligned edge stays that cube: 2 * 1024^3 -> m = n = k = 1024.
  CHECK(shapes(2.0 * 1024 * 1024 * 1024) == std::vector<Shape>{{1024, 1024, 1024}});
  // Where the cube root lands between multiples of 64, only k absorbs the rounding.
  //   2 * 223^3 = 22,179,134 FLOPs: cbrt = 223, 223 / 64 = 3.48 -> m = n = 192;
  //   k = 22,179,134 / (2 * 192^2) = 300.8 -> 301; executed 2 * 192^2 * 301 = 22,192,128, +0.06 %.
  //   (The square 192^3 GEMM ran 2 * 192^3 = 14,155,776: -36 %.)
  CHECK(shapes(2.0 * 223 * 223 * 223) == std::vector<Shape>{{192, 192, 301}});
  //   2 * 225^3 = 22,781,250 FLOPs: 225 / 64 = 3.52 -> m = n = 256;
  //   k = 22,781,250 / (2 * 256^2) = 173.8 -> 174; executed 22,806,528, +0.11 %.
  //   (The square 256^3 GEMM ran 33,554,432: +47 %.)
  CHECK(shapes(2.0 * 225 * 225 * 225) == std::vector<Shape>{{256, 256, 174}});
  // Tiny ops: the smallest GEMM, 64 x 64 x 1 (8,192 FLOPs), more than 10 FLOPs asked.
  CHECK(shapes(10.0) == std::vector<Shape>{{64, 64, 1}});
  CHECK(shapes(0.0).empty());
  CHECK(shapes(-1.0).empty());
  // Above the cap: 3.5 fp32 GEMMs of 8192^3. m = n = 8192 (capped), k in all = 3.5 * 8192 =
  // 28,672, and an 8192 x k fp32 operand fits for k <= 2^28 / (8192 * 4) = 8192: four GEMMs of
  // k = 28,672 / 4 = 7168, executing exactly the op's FLOPs.
  const double full = 2.0 * 8192.0 * 8192.0 * 8192.0;
  CHECK(shapes(3.5 * full, 4) == std::vector<Shape>(4, Shape{8192, 8192, 7168}));
  // Every op of 2 * 64 * 64 * 50 = 409,600 FLOPs or more, from there to 10^16, three sizes per
  // decade (k rounds by at most 0.5 of at least 50): within 1 %, aligned and under the cap.
  for (double flops = 409600; flops < 1e16; flops *= 2.154) {
    for (int elem : {2, 4}) {
      const std::vector<Shape> plan = shapes(flops, elem);
      INFO(flops << " FLOPs, " << elem << "-byte elements");
      REQUIRE_FALSE(plan.empty());
      CHECK(cuda::executed_flops(plan) == Approx(flops).epsilon(0.01));
      for (const Shape& g : plan) {
        CHECK(g.m % cuda::kGemmAlign == 0);
        CHECK(g.n == g.m);
        CHECK(g.k >= 1);
        CHECK(std::max(g.m * g.k, g.m * g.n) * elem <= cuda::kMaxBufferBytes);
      }
    }
  }
}

TEST_CASE("plan: GEMM operands hold finite random values in every dtype", "[cuda][plan]") {
  std::vector<std::uint16_t> w(4096);
  cuda::fill_operand_words(w.data(), w.size(), 1);
  int negative = 0;
  std::set<std::uint16_t> distinct;
  for (std::uint16_t x : w) {
    // fp16: exponent bits 14..10 are 14 or 15, i.e. |x| in [0.5, 2), never Inf / NaN (31) or
    // subnormal (0). bf16 and the high half of an fp32: exponent bits 14..7 in 112..127.
    const int fp16_exp = (x >> 10) & 0x1F;
    const int bf16_exp = (x >> 7) & 0xFF;
    CHECK((fp16_exp == 14 || fp16_exp == 15));
    CHECK((bf16_exp >= 112 && bf16_exp <= 127));
    negative += x >> 15;
    distinct.insert(x);
  }
  // Random signs and mantissas: about half negative, and far from constant (4096 draws from the
  // 2^12 patterns leave about 4096 * (1 - 1/e) = 2,589 distinct).
  CHECK(negative > 1800);
  CHECK(negative < 2300);
  CHECK(distinct.size() > 2000);
  std::vector<std::uint16_t> again(4096);
  cuda::fill_operand_words(again.data(), again.size(), 1);
  CHECK(again == w);  // deterministic in the seed
}

TEST_CASE("plan: NCCL warm-up roots are those the Program's rooted collectives use",
          "[cuda][plan]") {
  // Four GPUs, group {3, 1, 0, 2}: NCCL rank r is group.gpus[r]. A scatter from GPU 0 (rank 2) and
  // from GPU 2 (rank 3), a gather with no root (rank 0), a broadcast from GPU 3 (rank 0), and an
  // all-reduce, which has no root.
  Program p = base_program(4);
  p.groups.push_back({0, {3, 1, 0, 2}, "world"});
  int instance = 0;
  const auto collective = [&](CollectiveKind kind, int root) {
    for (int g = 0; g < 4; ++g) add_collective(p, kind, 0, instance, g, g, kMiB).root = root;
    ++instance;
  };
  collective(CollectiveKind::kScatter, 0);
  collective(CollectiveKind::kScatter, 2);
  collective(CollectiveKind::kGather, -1);
  collective(CollectiveKind::kBroadcast, 3);
  collective(CollectiveKind::kAllReduce, -1);
  p.collective_instances = instance;
  REQUIRE(core::validate_program(p).empty());
  const cuda::ProcessPlan plan = cuda::plan_process(p, {0, 1, 2, 3}, 4);
  REQUIRE(plan.groups.size() == 1);
  const auto& roots = plan.groups[0].roots;
  CHECK(roots.at(CollectiveKind::kScatter) == std::set<int>{2, 3});
  CHECK(roots.at(CollectiveKind::kGather) == std::set<int>{0});
  CHECK(roots.at(CollectiveKind::kBroadcast) == std::set<int>{0});
  CHECK(roots.count(CollectiveKind::kAllReduce) == 0);
  CHECK(plan.groups[0].chunks.size() == 4);  // each kind warmed up, at its 1 MiB chunk
  // The same roots where this process holds only GPU 1 (rank 1): they come from every member's
  // ops, so each process of the group warms up the same calls.
  const cuda::ProcessPlan one = cuda::plan_process(p, {1}, 4, /*shared_nccl_ids=*/true);
  REQUIRE(one.groups.size() == 1);
  CHECK(one.groups[0].roots == plan.groups[0].roots);
}

TEST_CASE("a test needing more GPUs than present skips only itself", "[cuda]") {
  using test::GpuSkip;
  CHECK(test::gpu_skip(1, 1) == GpuSkip::kRun);
  CHECK(test::gpu_skip(2, 8) == GpuSkip::kRun);
  CHECK(test::gpu_skip(2, 1) == GpuSkip::kSkipTest);  // a [2gpu] test on one H200
  CHECK(test::gpu_skip(1, 0) == GpuSkip::kSkipBinary);
  CHECK(test::gpu_skip(2, 0) == GpuSkip::kSkipBinary);
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

TEST_CASE("plan: what one process cannot run is BackendUnavailable", "[cuda][plan]") {
  const Program p = two_gpu_program();
  const auto message = [&](const std::vector<int>& gpus, int devices) {
    try {
      cuda::plan_process(p, gpus, devices);
    } catch (const BackendUnavailable& e) {
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
  } catch (const BackendUnavailable& e) {
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
    INFO(p.name_of(op) << ": " << (e - s) << " ns");
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

TEST_CASE("NCCL across two GPUs: per-thread all-reduce, one-thread broadcast, peer copy",
          "[gpu][2gpu]") {
  auto rt = runtime_or_skip(2);
  if (!rt) return;
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

TEST_CASE("every collective kind on two GPUs, each GPU's op from its own thread", "[gpu][2gpu]") {
  auto rt = runtime_or_skip(2);
  if (!rt) return;
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
    INFO(p.name_of(op) << " on GPU " << op.gpu << ": " << (e - s) << " ns");
    CHECK(e > s);
  }
}
