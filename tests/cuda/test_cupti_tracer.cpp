// CUPTI tracing (profiler/cupti/cupti_tracer.hpp) and the CUDA runtime's --cupti path. [cuda]
// tests run anywhere the backend builds: without a GPU, CUPTI's refusal must be one line of
// BackendUnavailable, never a crash. [gpu] tests trace small Programs on real GPUs ([2gpu]: on
// two); without one they print "SKIPPED: <why>" and exit 77 (CTest: skipped), and a [2gpu] test on
// one GPU skips only itself (op_fixture.hpp).
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "backends/cuda/cuda_runtime.hpp"
#include "core/program/program.hpp"
#include "profiler/cupti/cupti_tracer.hpp"
#include "tests/cuda/op_fixture.hpp"

using namespace csim;
using core::Op;
using core::OpKind;
using core::Program;

namespace {

using test::skip;

// A traced runtime on `min_devices` CUDA devices. No GPU: the process exits 77 (skipped); too few:
// null, after a visible skip of this test (test::have_gpus), and the test returns.
std::unique_ptr<real::DeviceRuntime> traced_runtime_or_skip(int min_devices = 1) {
  if (!test::have_gpus(min_devices)) return nullptr;
  return cuda::make_cuda_runtime(cuda::CudaOptions{true});
}

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// GPUs 0..n-1, one host thread each, a compute (2g) and an NCCL (2g + 1) stream each.
Program program(int n_gpus) {
  Program p;
  p.world_gpus = n_gpus;
  p.gpus_per_node = n_gpus;
  p.steps = 1;
  p.processes.push_back({0, 0, "test", false});
  for (int g = 0; g < n_gpus; ++g) {
    p.active_gpus.push_back(g);
    p.threads.push_back({g, 0, g, "main " + std::to_string(g)});
    p.streams.push_back({2 * g, g, core::StreamRole::kCompute, "compute"});
    p.streams.push_back({2 * g + 1, g, core::StreamRole::kComm, "nccl"});
  }
  return p;
}

using csim::test::add_op;

// A runtime that is not the CUDA one: take_cupti_capture must give nothing.
class OtherRuntime final : public real::DeviceRuntime {
 public:
  real::RuntimeInfo info() const override { return {}; }
  void open(const Program&, const std::vector<int>&, std::int64_t) override {}
  void enqueue(const Op&, const std::vector<core::OpId>&) override {}
  void host_wait(core::OpId) override {}
  void finish() override {}
  bool op_interval(core::OpId, TimeNs*, TimeNs*) const override { return false; }
};

}  // namespace

TEST_CASE("CuptiTracer: one line of BackendUnavailable without a GPU, records with one",
          "[cuda][cupti]") {
  INFO(cupti::CuptiTracer::version_line());
  CHECK(cupti::CuptiTracer::version_line().find("CUPTI") != std::string::npos);
  cupti::CuptiTracer tracer;
  if (test::cuda_device_count() == 0) {
    std::string message;
    try {
      tracer.start(steady_now_ns());
    } catch (const BackendUnavailable& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find("CUPTI tracing cannot start: ") == 0);
    CHECK(message.find(" failed: CUPTI_ERROR_") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    CHECK_FALSE(tracer.running());
    tracer.push_op(1);  // harmless when not running
    tracer.pop_op();
    tracer.stop();
    CHECK(tracer.take().empty());
    // The slot was given back: another tracer may try again.
    cupti::CuptiTracer again;
    CHECK_THROWS_AS(again.start(steady_now_ns()), BackendUnavailable);
    return;
  }
  const std::int64_t zero = steady_now_ns();
  tracer.start(zero);
  REQUIRE(tracer.running());
  CHECK(tracer.clock_pair_gap_ns() >= 0);
  cupti::CuptiTracer second;
  CHECK_THROWS_AS(second.start(zero), BackendUnavailable);  // one active per process
  void* buf = nullptr;
  REQUIRE(cudaMalloc(&buf, 1 << 20) == cudaSuccess);
  {
    const cupti::OpScope scope(&tracer, 42);
    REQUIRE(cudaMemsetAsync(buf, 0, 1 << 20, nullptr) == cudaSuccess);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  tracer.stop();
  cudaFree(buf);
  const std::vector<cupti::Record> rs = tracer.take();
  bool memset_of_op = false;
  for (const cupti::Record& r : rs) {
    if (r.kind != cupti::RecordKind::kMemset) continue;
    memset_of_op = r.op_id == 42 && r.bytes == (1 << 20) && r.device == 0;
    CHECK(r.start_ns >= 0);  // after the clock zero, on the host clock
    CHECK(r.end_ns >= r.start_ns);
    CHECK(r.end_ns - (steady_now_ns() - zero) <= 0);
  }
  CHECK(memset_of_op);
}

TEST_CASE("take_cupti_capture: nothing from a runtime that is not a traced CUDA one",
          "[cuda][cupti]") {
  OtherRuntime other;
  const cuda::CuptiCapture c = cuda::take_cupti_capture(other);
  CHECK(c.records.empty());
  CHECK(c.gpu_of_uuid.empty());
  if (test::cuda_device_count() == 0) {
    // The option changes nothing about how a missing GPU is reported.
    try {
      cuda::make_cuda_runtime(cuda::CudaOptions{true});
      FAIL("a runtime was made without a GPU");
    } catch (const BackendUnavailable& e) {
      CHECK(std::string(e.what()).find("no usable CUDA GPU") == 0);
    }
  }
}

TEST_CASE("traced run: every GEMM kernel and copy maps to its op, inside its interval", "[gpu]") {
  auto rt = traced_runtime_or_skip();
  Program p = program(1);
  Op& gemm = add_op(p, OpKind::kCompute, "fc.fwd", 0, 0, 0);
  gemm.compute_kind = core::ComputeKind::kGemm;
  gemm.dtype = core::Dtype::kBf16;
  gemm.flops = 2.0 * 4096 * 4096 * 4096;
  Op& relu = add_op(p, OpKind::kCompute, "relu.fwd", 0, 0, 0);
  relu.compute_kind = core::ComputeKind::kElementwise;
  relu.bytes = 64 * kMiB;
  REQUIRE(core::validate_program(p).empty());
  rt->open(p, {0}, steady_now_ns());
  rt->enqueue(p.ops[0], {});
  rt->enqueue(p.ops[1], {});
  rt->finish();
  const cuda::CuptiCapture c = cuda::take_cupti_capture(*rt);
  CHECK(c.gpu_of_uuid.size() == 1);
  int kernels = 0, copies = 0;
  for (const cupti::Record& r : c.records) {
    if (!cupti::is_gpu_record(r.kind)) continue;
    INFO(cupti::to_string(r.kind) << " " << r.name << " op " << r.op_id);
    CHECK(r.gpu == 0);
    REQUIRE(r.op_id >= 0);  // the warm-up is not traced: every GPU record is an op's
    TimeNs s = 0, e = 0;
    REQUIRE(rt->op_interval(static_cast<core::OpId>(r.op_id), &s, &e));
    // The op's events bracket its work; the two clock pairings differ by microseconds.
    CHECK(r.start_ns >= s - 50'000);
    CHECK(r.end_ns <= e + 50'000);
    CHECK(r.op_id <= 1);
    // The GEMM's kernels (cuBLAS may add a memset of its own), and the element-wise op's one
    // 32 MiB device-to-device copy.
    if (r.kind == cupti::RecordKind::kKernel) kernels += r.op_id == 0;
    if (r.kind == cupti::RecordKind::kMemcpy) copies += r.op_id == 1 && r.bytes == 32 * kMiB;
  }
  CHECK(kernels >= 1);
  CHECK(copies == 1);
  bool noted = false;
  for (const std::string& n : rt->info().notes) noted |= n.find("CUPTI traced") == 0;
  CHECK(noted);
}

TEST_CASE("traced run: a one-thread NCCL batch's kernels map to each GPU's own op", "[gpu][2gpu]") {
  auto rt = traced_runtime_or_skip(2);
  if (!rt) return;
  Program p = program(2);
  p.groups.push_back({0, {0, 1}, "world"});
  for (int g = 0; g < 2; ++g) {  // thread 0 issues both GPUs' ops: one batch
    Op& b = add_op(p, OpKind::kCollective, "broadcast", 0, 2 * g + 1, g);
    b.collective = core::CollectiveKind::kBroadcast;
    b.group = 0;
    b.instance = 0;
    b.bytes = 32 * kMiB;
    b.root = 0;
  }
  p.collective_instances = 1;
  REQUIRE(core::validate_program(p).empty());
  rt->open(p, {0, 1}, steady_now_ns());
  rt->enqueue(p.ops[0], {});
  rt->enqueue(p.ops[1], {});
  rt->finish();
  const cuda::CuptiCapture c = cuda::take_cupti_capture(*rt);
  int nccl = 0;
  for (const cupti::Record& r : c.records) {
    if (r.kind != cupti::RecordKind::kKernel) continue;
    INFO(r.name << " on GPU " << r.gpu << ", op " << r.op_id);
    ++nccl;
    CHECK(r.op_id == r.gpu);  // op g runs on GPU g
  }
  CHECK(nccl >= 2);
}
