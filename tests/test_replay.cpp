// simrun replay on synthetic Kineto traces built here (docs/replay.md): the importer's stages and
// stats, the edges it reads and infers, exact replay on the traces' own GPU, the what-ifs, bad
// input. Times in the traces are µs (Chrome trace); expectations are derived beside each check.
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/cost/collective_cost.hpp"
#include "core/cost/compute_cost.hpp"
#include "core/cost/gemm_shape_cost.hpp"
#include "core/error.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/hardware/topology.hpp"
#include "replay/collective_recost.hpp"
#include "replay/gemm_shapes.hpp"
#include "replay/gpu_whatif.hpp"
#include "replay/kineto_tokenizer.hpp"
#include "replay/replay_run.hpp"
#include "replay/trace_sorter.hpp"
#include "tests/replay_trace_support.hpp"
#include "tests/simrun_cli_support.hpp"

namespace fs = std::filesystem;
using namespace csim;
using replay::Stat;
using namespace csim::test;

namespace {

// The base trace: one step [0, 200] µs; a launch at 10 (5 µs) whose kernel runs [20, 120] on
// stream 7; cudaDeviceSynchronize [30, 122] returns 2 µs after the kernel; idle Python to 200.
std::vector<std::string> base(const std::string& kname = "elementwise_kernel") {
  return {step(1, 0, 200), launch(10, 5, 1), kernel(kname, 7, 20, 100, 1),
          launch(30, 92, 2, "cudaDeviceSynchronize")};
}

}  // namespace

TEST_CASE("replay: a step replays exactly on its own GPU", "[replay]") {
  const replay::ReplayOutcome o = run_replay("base.json", trace(base()));
  REQUIRE(o.steps.size() == 1);
  // Host: 10 Python, enqueue, 5 launch, 15 Python, then the sync waits for the kernel. The
  // measured launch latency is 20 - 10 = 10 µs, so the kernel runs [20, 120] again; the sync
  // returns at 120 + 2 = 122 and Python runs to 200: the step is 200 µs, as measured.
  CHECK(o.steps[0].measured_ns == 200 * kUs);
  CHECK(o.steps[0].replayed_ns == 200 * kUs);
  CHECK(o.source_gpu == "A100-SXM4-40GB");
  CHECK(o.imported.stats.get(Stat::sync_reads) == 1);
  CHECK(o.imported.stats.get(Stat::launches_matched) == 1);
  CHECK(o.imported.stats.get(Stat::profiler_steps) == 1);
  REQUIRE(o.streams.size() == 1);
  CHECK(o.streams[0].measured_busy_ns == 100 * kUs);
  CHECK(o.streams[0].replayed_busy_ns == 100 * kUs);
}

TEST_CASE("replay: measured kernel durations are kept by the cost model", "[replay]") {
  // Op::fixed_ns on a compute op is its duration whatever its FLOPs (docs/replay.md, "Durations").
  core::Op op;
  op.kind = core::OpKind::kCompute;
  op.flops = 1e15;
  op.fixed_ns = 1234;
  const core::GpuSpec& g = core::find_gpu("H100-SXM5-80GB")->gpu;
  CHECK(core::op_compute_ns(g, op) == 1234);
  core::OpComputeMemo memo;
  CHECK(memo.get(g, op) == 1234);
}

TEST_CASE("replay: another GPU scales memory-bound kernels by the bandwidth ratio", "[replay]") {
  const replay::ReplayOutcome o =
      run_replay("bw.json", trace(base()), {"cluster.gpu=H100-SXM5-80GB"});
  const core::GpuSpec& a = core::find_gpu("A100-SXM4-40GB")->gpu;
  const core::GpuSpec& h = core::find_gpu("H100-SXM5-80GB")->gpu;
  // d' = 100 µs * bw(A100) / bw(H100); the step loses 100 - d' (the sync returns 2 µs after the
  // kernel, the Python after it is host time, unchanged).
  const auto d =
      static_cast<TimeNs>(std::llround(100e3 * a.mem_bw_bytes_per_s / h.mem_bw_bytes_per_s));
  REQUIRE(o.steps.size() == 1);
  CHECK(o.steps[0].replayed_ns == 200 * kUs - (100 * kUs - d));
  REQUIRE(o.explain.size() == 1);
  CHECK(o.explain[0].cls == replay::KernelClass::kMemoryBound);
  CHECK(o.explain[0].replayed_ns == d);
}

TEST_CASE("replay: GEMM kernels scale by the peak of their precision", "[replay]") {
  const std::string gemm = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn";
  const replay::ReplayOutcome o =
      run_replay("gemm.json", trace(base(gemm)), {"cluster.gpu=H100-SXM5-80GB"});
  const core::GpuSpec& a = core::find_gpu("A100-SXM4-40GB")->gpu;
  const core::GpuSpec& h = core::find_gpu("H100-SXM5-80GB")->gpu;
  // bf16 in the name: tensor cores, not TF32 (s16816 alone would be TF32); d' = 100 µs * ratio.
  const double r = a.peak_bf16_flops_per_s / h.peak_bf16_flops_per_s;
  REQUIRE(o.explain.size() == 1);
  CHECK(o.explain[0].cls == replay::KernelClass::kGemm);
  CHECK(o.explain[0].replayed_ns == static_cast<TimeNs>(std::llround(100e3 * r)));
  CHECK(o.explain[0].rule.find("bf16") != std::string::npos);
}

TEST_CASE("replay: launch-bound kernels, collectives and host copies are unchanged", "[replay]") {
  bool tc = false, tf32 = false;
  using replay::Cat;
  using replay::KernelClass;
  // 5 µs is kLaunchBoundNs: at or below it a kernel is launch-bound whatever its name.
  CHECK(replay::classify_kernel(Cat::kKernel, "sm80_xmma_gemm", 5000, &tc, &tf32) ==
        KernelClass::kLaunchBound);
  CHECK(replay::classify_kernel(Cat::kKernel, "ncclKernel_AllReduce_RING_LL_Sum_float", 900000, &tc,
                                &tf32) == KernelClass::kCollective);
  CHECK(replay::classify_kernel(Cat::kMemcpy, "Memcpy HtoD (Pinned -> Device)", 900000, &tc,
                                &tf32) == KernelClass::kHostCopy);
  CHECK(replay::classify_kernel(Cat::kKernel, "void cudnn::bn_fw_tr_1C11_kernel_NCHW", 90000, &tc,
                                &tf32) == KernelClass::kMemoryBound);
  CHECK(replay::classify_kernel(Cat::kKernel, "cutlass_80_tensorop_s1688gemm_64x64", 90000, &tc,
                                &tf32) == KernelClass::kGemm);
  CHECK(tf32);
  // fbgemm's name holds "gemm", but its embedding-table kernels are memory-bound lookups.
  CHECK(replay::classify_kernel(
            Cat::kKernel, "void fbgemm_gpu::split_embedding_codegen_forward_unweighted_kernel",
            90000, &tc, &tf32) == KernelClass::kMemoryBound);
}

TEST_CASE("replay: a kernel held back by another stream waits for it", "[replay]") {
  // Stream 13's kernel is launched at 12 but starts at 121, right after stream 7's [20, 120]:
  // a cudaStreamWaitEvent the trace does not show. Inferred, it keeps the order on another GPU.
  std::vector<std::string> e = base();
  e.push_back(launch(16, 2, 3));
  e.push_back(kernel("other_kernel", 13, 121, 50, 3));
  const replay::ReplayOutcome own = run_replay("edge.json", trace(e));
  CHECK(own.imported.stats.get(Stat::stream_edges) == 1);
  const replay::ReplayOutcome h =
      run_replay("edge2.json", trace(e), {"cluster.gpu=H100-SXM5-80GB"});
  const auto& t = h.run.result.timings;
  const auto& ops = h.imported.gpu_ops;
  REQUIRE(ops.size() == 2);
  // Both kernels shrink; the second still starts exactly when the first ends.
  CHECK(t[static_cast<std::size_t>(ops[1].op)].start_ns ==
        t[static_cast<std::size_t>(ops[0].op)].end_ns);
}

TEST_CASE("replay: an idle thread resumes after the thread that woke it", "[replay]") {
  // Thread 200 (autograd) is idle until 60, when it calls cudaLaunchKernel; the loop thread's
  // last call before that ends at 35. The inferred edge makes thread 200 start 60 - 35 = 25 µs
  // after that call, and halving the loop's Python time moves it earlier.
  std::vector<std::string> e = {
      step(1, 0, 200), launch(30, 5, 1), kernel("k1", 7, 40, 10, 1),
      ev("cuda_runtime", "cudaLaunchKernel", 100, 200, 60, 5, R"("correlation":2)"),
      kernel("k2", 7, 70, 10, 2)};
  const replay::ReplayOutcome o = run_replay("thread.json", trace(e));
  CHECK(o.imported.stats.get(Stat::thread_edges) >= 1);
  CHECK(o.steps[0].replayed_ns == 200 * kUs);
  const replay::ReplayOutcome fast =
      run_replay("thread2.json", trace(e), {"replay.python_scale=0.5"});
  // The loop thread's 30 µs of Python before its launch halve to 15: k2's launch moves 15 µs
  // earlier with it.
  const auto& t0 = o.run.result.timings;
  const auto& t1 = fast.run.result.timings;
  const auto k2 = static_cast<std::size_t>(o.imported.gpu_ops[1].op);
  CHECK(t0[k2].start_ns - t1[k2].start_ns == 15 * kUs);
}

TEST_CASE("replay: a trace without ProfilerStep replays as one window", "[replay]") {
  std::vector<std::string> e = base();
  e.erase(e.begin());  // no step annotation
  const replay::ReplayOutcome o = run_replay("nostep.json", trace(e));
  CHECK(o.imported.stats.get(Stat::no_steps) == 1);
  REQUIRE(o.steps.size() == 1);
  CHECK(o.steps[0].name == "window");
  // The window: from the first record (10) to the last end (122).
  CHECK(o.steps[0].measured_ns == 112 * kUs);
  CHECK(o.steps[0].replayed_ns == 112 * kUs);
}

TEST_CASE("replay: damaged records are counted by cause and skipped", "[replay]") {
  std::vector<std::string> e = base();
  e.push_back("42");                                                               // not an object
  e.push_back(R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"dur":1})");  // no ts
  e.push_back(ev("kernel", "neg", 0, 7, 5, -3));                                   // negative
  e.push_back(R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":"x","dur":1})");
  e.push_back(R"({"ph":"B","name":"begin","pid":1,"tid":1,"ts":1})");
  const replay::ReplayOutcome o = run_replay("damaged.json", trace(e));
  CHECK(o.imported.stats.get(Stat::not_an_object) == 1);
  CHECK(o.imported.stats.get(Stat::missing_field) == 1);
  CHECK(o.imported.stats.get(Stat::negative_duration) == 1);
  CHECK(o.imported.stats.get(Stat::bad_timestamp) == 1);
  CHECK(o.imported.stats.get(Stat::unknown_phase) == 1);
  CHECK(o.imported.stats.errors() == 4);
  CHECK(o.steps[0].replayed_ns == 200 * kUs);  // the good records replay as before
  std::ostringstream out;
  replay::print_replay(o, out, false);
  CHECK(out.str().find("negative_duration") != std::string::npos);
}

TEST_CASE("replay: collective sizes come from record_param_comms", "[replay]") {
  std::vector<std::string> e = {
      step(1, 0, 300),
      ev("cpu_op", "record_param_comms", 100, 100, 5, 20,
         R"("Collective name":"allreduce","In msg nelems":1000,"Out msg nelems":1000,"dtype":"BFloat16","Group size":8)"),
      launch(10, 5, 1),
      kernel("ncclKernel_AllReduce_RING_LL_Sum_bf16", 20, 20, 200, 1),
      launch(40, 5, 2),
      kernel("ncclDevKernel_AllGather_RING_LL", 20, 220, 50, 2)};
  const replay::ReplayOutcome o = run_replay("comms.json", trace(e));
  CHECK(o.imported.stats.get(Stat::collectives) == 2);
  CHECK(o.imported.stats.get(Stat::collectives_sized) == 1);
  CHECK(o.imported.stats.get(Stat::collectives_unsized) == 1);
  const core::Op& ar = o.imported.program.ops[static_cast<std::size_t>(o.imported.gpu_ops[0].op)];
  CHECK(ar.kind == core::OpKind::kCollective);
  CHECK(ar.bytes == 2000);  // 1000 elements x 2 bytes (BFloat16)
  CHECK(ar.fixed_ns == 200 * kUs);
  const core::Op& ag = o.imported.program.ops[static_cast<std::size_t>(o.imported.gpu_ops[1].op)];
  CHECK(ag.collective == core::CollectiveKind::kAllGather);  // from the kernel's name
  CHECK(o.imported.program.streams[static_cast<std::size_t>(ar.stream)].role ==
        core::StreamRole::kComm);
}

TEST_CASE("replay: memcpy direction and graph launches", "[replay]") {
  std::vector<std::string> e = {step(1, 0, 100),
                                launch(5, 5, 1, "cudaMemcpyAsync"),
                                ev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 0, 9, 12, 8,
                                   R"("device":0,"stream":9,"correlation":1,"bytes":4096)"),
                                launch(20, 10, 2, "cudaGraphLaunch"),
                                kernel("g1", 7, 32, 10, 2),
                                kernel("g2", 7, 42, 10, 2)};
  const replay::ReplayOutcome o = run_replay("copy.json", trace(e));
  const core::Op& c = o.imported.program.ops[static_cast<std::size_t>(o.imported.gpu_ops[0].op)];
  CHECK(c.kind == core::OpKind::kCopy);
  CHECK(c.copy_kind == core::CopyKind::kH2DPinned);
  CHECK(c.bytes == 4096);
  CHECK(o.imported.stats.get(Stat::graph_launch_kernels) == 2);  // one launch, two kernels
  CHECK(o.imported.gpu_ops.size() == 3);
}

TEST_CASE("replay: gzip traces and folders of ranks", "[replay]") {
  const fs::path dir = scratch() / "ranks";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string text = trace(base());
  std::ofstream(dir / "rank1.json") << text;
  gzFile f = gzopen((dir / "rank0.json.gz").c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  std::ofstream(dir / "notes.txt") << "not a trace";
  const std::vector<std::string> files = replay::expand_inputs({dir.string()});
  REQUIRE(files.size() == 2);  // *.json and *.json.gz, sorted by name
  CHECK(files[0].find("rank0.json.gz") != std::string::npos);
  replay::ReplayRequest rq;
  rq.inputs = {dir.string()};
  const replay::ReplayOutcome o = replay::replay(rq);
  REQUIRE(o.steps.size() == 2);  // one per rank, each on its own GPU
  CHECK(o.steps[0].replayed_ns == 200 * kUs);
  CHECK(o.steps[1].replayed_ns == 200 * kUs);
  CHECK(o.steps[1].gpu == 1);
}

TEST_CASE("replay: host what-ifs: GIL off and faster dispatch", "[replay]") {
  const replay::ReplayOutcome o =
      run_replay("host.json", trace(base()), {"host.gil=false", "replay.dispatch_scale=0"});
  CHECK_FALSE(o.imported.program.processes[0].has_gil);
  // Dispatch time 0: the launch's 5 µs goes (off the critical path: the sync waits for the
  // kernel, enqueued at 10, started 10 µs later, ending at 120), and so does the sync's 2 µs
  // after the kernel (on it); the 78 µs of Python after remain: 120 + 78 = 198 µs.
  CHECK(o.steps[0].replayed_ns == 198 * kUs);
}

TEST_CASE("replay: bad input is one line naming the file, exit 2", "[replay]") {
  const fs::path notjson = write("bad.json", "{\"traceEvents\": [");
  test::CliResult r = test::run_simrun({"replay", notjson.string()});
  CHECK(r.code == 2);
  CHECK(r.err.find(notjson.string()) != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  const fs::path empty = write("empty.json", trace({}));
  r = test::run_simrun({"replay", empty.string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("nothing to replay") != std::string::npos);
  const fs::path ok = write("ok.json", trace(base()));
  r = test::run_simrun({"replay", ok.string(), "--set", "replay.python_scale=fast"});
  CHECK(r.code == 2);
  CHECK(r.err.find("replay.python_scale") != std::string::npos);
  r = test::run_simrun({"replay", (fs::temp_directory_path() / "csim_no_such.json").string()});
  CHECK(r.code == 2);
}

TEST_CASE("replay: the command prints steps, streams, stats and writes the trace", "[replay]") {
  const fs::path in = write("cli.json", trace(base()));
  const fs::path out = scratch() / "cli_out.json";
  fs::remove(out);
  const test::CliResult r =
      test::run_simrun({"replay", in.string(), "--set", "cluster.gpu=H100-SXM5-80GB", "--explain",
                        "-o", out.string()});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("ProfilerStep#1") != std::string::npos);
  CHECK(r.out.find("stream 7") != std::string::npos);
  CHECK(r.out.find("sync_reads") != std::string::npos);
  CHECK(r.out.find("memory-bound") != std::string::npos);  // --explain
  CHECK(fs::exists(out));
}

TEST_CASE("replay: the same trace replays to the same timings", "[replay]") {
  std::vector<std::string> e = base();
  e.push_back(launch(16, 2, 3));
  e.push_back(kernel("other_kernel", 13, 121, 50, 3));
  const replay::ReplayOutcome a = run_replay("det1.json", trace(e));
  const replay::ReplayOutcome b = run_replay("det2.json", trace(e));
  REQUIRE(a.run.result.timings.size() == b.run.result.timings.size());
  for (std::size_t i = 0; i < a.run.result.timings.size(); ++i) {
    CHECK(a.run.result.timings[i].start_ns == b.run.result.timings[i].start_ns);
    CHECK(a.run.result.timings[i].end_ns == b.run.result.timings[i].end_ns);
  }
}

TEST_CASE("replay: GPU names map to the catalog", "[replay]") {
  CHECK(replay::catalog_gpu_of("NVIDIA A100-PG509-200") == "A100-SXM4-40GB");
  CHECK(replay::catalog_gpu_of("NVIDIA A100-SXM4-80GB") == "A100-SXM4-80GB");
  CHECK(replay::catalog_gpu_of("Tesla V100-SXM2-32GB") == "V100-SXM2-32GB");
  CHECK(replay::catalog_gpu_of("NVIDIA H100 80GB HBM3") == "H100-SXM5-80GB");
  CHECK(replay::catalog_gpu_of("").empty());
  // No deviceProperties: the default GPU, counted.
  const replay::ReplayOutcome o = run_replay("nogpu.json", trace(base(), ""));
  CHECK(o.imported.stats.get(Stat::gpu_guessed) == 1);
}

TEST_CASE("replay: GEMM shapes from Input Dims", "[replay]") {
  core::GemmShape g;
  REQUIRE(replay::gemm_shape_of("aten::mm", "[[64,128],[128,256]]", &g));
  CHECK((g.m == 64 && g.k == 128 && g.n == 256 && g.batch == 1));
  REQUIRE(replay::gemm_shape_of("aten::addmm", "[[256],[64,128],[128,256],[],[]]", &g));
  CHECK((g.m == 64 && g.k == 128 && g.n == 256));
  REQUIRE(replay::gemm_shape_of("aten::bmm", "[[8,64,128],[8,128,32]]", &g));
  CHECK((g.batch == 8 && g.m == 64 && g.k == 128 && g.n == 32));
  REQUIRE(replay::gemm_shape_of("aten::linear", "[[4,16,128],[256,128],[256]]", &g));
  CHECK((g.m == 64 && g.k == 128 && g.n == 256));  // M = 4 x 16 leading rows
  CHECK_FALSE(replay::gemm_shape_of("aten::mm", "[[64,128]]", &g));
  CHECK_FALSE(replay::gemm_shape_of("aten::add", "[[64,128],[64,128]]", &g));
  CHECK_FALSE(replay::gemm_shape_of("aten::mm", "[[\"x\"]]", &g));

  // A GEMM kernel launched inside aten::mm: on another GPU it scales by the cost model's time of
  // that shape on both GPUs, not by the peak ratio alone.
  const std::string gemm = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn";
  std::vector<std::string> e = {
      step(1, 0, 200),
      ev("cpu_op", "aten::mm", 100, 100, 8, 10, R"("Input Dims":[[1024,4096],[4096,1024]])"),
      launch(10, 5, 1), kernel(gemm, 7, 20, 100, 1), launch(30, 92, 2, "cudaDeviceSynchronize")};
  const replay::ReplayOutcome o =
      run_replay("shape.json", trace(e), {"cluster.gpu=H100-SXM5-80GB"});
  CHECK(o.imported.stats.get(Stat::gemm_shapes) == 1);
  const core::GemmShape s{1, 1024, 1024, 4096};
  const double r =
      static_cast<double>(core::gemm_duration_ns(core::find_gpu("H100-SXM5-80GB")->gpu,
                                                 core::Dtype::kBf16, s, core::GemmPass::kForward)) /
      static_cast<double>(core::gemm_duration_ns(core::find_gpu("A100-SXM4-40GB")->gpu,
                                                 core::Dtype::kBf16, s, core::GemmPass::kForward));
  REQUIRE(o.explain.size() == 1);
  CHECK(o.explain[0].replayed_ns == static_cast<TimeNs>(std::llround(100e3 * r)));
  CHECK(o.explain[0].rule.find("1x1024x1024x4096") != std::string::npos);
  const core::Op& op = o.imported.program.ops[static_cast<std::size_t>(o.imported.gpu_ops[0].op)];
  CHECK(op.flops == 2.0 * 1024 * 1024 * 4096);
}

// Collectives on another cluster and data-parallel scale-out (docs/replay.md, "Collectives on
// another cluster"): d' = d x t(to, p') / t(from, p), t the cost model's time
// (core::plan_collective).
namespace {

// One all-reduce of `nelems` floats over a group of `group` ranks ("Group size"; -1: absent), its
// NCCL kernel measured at `dur_us`; `world` > 0 writes distributedInfo.world_size.
std::string allreduce_trace(long nelems, int group, double dur_us, int world = 0) {
  std::string args = R"("Collective name":"allreduce","In msg nelems":)" + std::to_string(nelems) +
                     R"(,"Out msg nelems":)" + std::to_string(nelems) + R"(,"dtype":"Float")";
  if (group > 0) args += R"(,"Group size":)" + std::to_string(group);
  std::string t = trace(
      {step(1, 0, dur_us + 100), ev("cpu_op", "record_param_comms", 100, 100, 5, 20, args),
       launch(10, 5, 1), kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 20, 20, dur_us, 1)});
  if (world > 0)
    t.insert(1, R"("distributedInfo":{"backend":"nccl","rank":0,"world_size":)" +
                    std::to_string(world) + "},");
  return t;
}

}  // namespace

TEST_CASE("replay: collectives on the job's own cluster keep their measured time", "[replay]") {
  // 64 MiB of floats over 2 ranks, measured 3 ms: from == to, so t(to)/t(from) is 1 exactly and
  // d' = d to the nanosecond, whatever the host what-ifs.
  const std::string t = allreduce_trace(16 << 20, 2, 3000);
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{}, std::vector<std::string>{"host.gil=false"},
        std::vector<std::string>{"replay.dp_scale=1"}}) {
    const replay::ReplayOutcome o = run_replay("own.json", t, sets);
    CHECK(collective_ns(o) == 3000 * kUs);
    CHECK(o.collectives_recosted == 1);
    CHECK(o.collectives_fixed == 0);
    CHECK(o.job_ranks == 2);  // no distributedInfo: the group's size
    bool x1 = false;
    for (const replay::ExplainRow& r : o.explain) x1 |= r.rule.rfind("x1 (all_reduce", 0) == 0;
    CHECK(x1);
    CHECK(o.steps[0].replayed_ns == o.steps[0].measured_ns);
  }
}

TEST_CASE("replay: dp_scale=2 re-costs a data-parallel all-reduce at twice the ranks", "[replay]") {
  // 1 GiB of floats over the whole job (2 ranks on one 8-GPU A100 node), ring forced. The model's
  // ring all-reduce is 2(p-1) alpha + 2(p-1)/p x S / B (core/cost/collective_cost.hpp): on the
  // NVSwitch every GPU keeps its B, so 2 -> 4 ranks multiplies the bandwidth term by
  // (2 x 3/4) / (2 x 1/2) = 1.5; the latency term (tens of us against 1 GiB / ~240 GB/s x 1 = 4.5
  // ms) moves it by well under 1 %.
  const std::string t = allreduce_trace(1L << 28, 2, 10000, 2);
  const std::vector<std::string> ring = {"nccl.algo=ring"};
  const replay::ReplayOutcome own = run_replay("dp1.json", t, ring);
  const replay::ReplayOutcome dp2 =
      run_replay("dp2.json", t, {"nccl.algo=ring", "replay.dp_scale=2"});
  CHECK(collective_ns(own) == 10000 * kUs);
  CHECK(dp2.job_ranks_to == 4);
  const double r = static_cast<double>(collective_ns(dp2)) / static_cast<double>(10000 * kUs);
  CHECK(r == Approx(1.5).epsilon(0.01));
  // The ratio is the model's own: the same plans timed here.
  core::CommParams params;
  params.algo = core::CollectiveAlgo::kRing;
  const core::Topology topo(own.job_from);
  const TimeNs t2 = replay::modelled_collective_ns(topo, params, core::CollectiveKind::kAllReduce,
                                                   2, static_cast<double>(1L << 30));
  const TimeNs t4 = replay::modelled_collective_ns(topo, params, core::CollectiveKind::kAllReduce,
                                                   4, static_cast<double>(1L << 30));
  CHECK(collective_ns(dp2) ==
        std::llround(10000e3 * static_cast<double>(t4) / static_cast<double>(t2)));
}

TEST_CASE("replay: a group smaller than the job is not data-parallel", "[replay]") {
  // world_size 4, Group size 2 (a tensor-parallel pair, say): dp_scale leaves p at 2 and the
  // 4 -> 8 ranks still fit one 8-GPU node, so the plan and d are unchanged.
  const replay::ReplayOutcome o =
      run_replay("tp.json", allreduce_trace(1 << 20, 2, 500, 4), {"replay.dp_scale=2"});
  CHECK(o.job_ranks == 4);
  CHECK(o.job_ranks_to == 8);
  CHECK(collective_ns(o) == 500 * kUs);
  CHECK_FALSE(replay::is_data_parallel(core::CollectiveKind::kAllReduce, 2, 4));
  CHECK(replay::is_data_parallel(core::CollectiveKind::kReduceScatter, 4, 4));
  CHECK_FALSE(replay::is_data_parallel(core::CollectiveKind::kBroadcast, 4, 4));
}

TEST_CASE("replay: a collective across nodes is re-costed on the network", "[replay]") {
  // cluster.gpus_per_node=1 puts the 2 ranks on 2 nodes: the all-reduce crosses the NICs
  // (25 GB/s per A100 node's NIC against 300 GB/s of NVLink), so its model time, and d, grow.
  const std::string t = allreduce_trace(16 << 20, 2, 3000);
  const replay::ReplayOutcome o = run_replay("net.json", t, {"cluster.gpus_per_node=1"});
  CHECK(o.job_to.nodes == 2);
  CHECK(o.job_from.nodes == 1);
  CHECK(collective_ns(o) > 3000 * kUs);
  // Nothing on the host waits for it (no synchronisation in this trace): the step keeps its
  // host time, the comm stream's busy time grows.
  TimeNs busy = 0;
  for (const replay::StreamResult& s : o.streams) busy += s.replayed_busy_ns;
  CHECK(busy == collective_ns(o));
  CHECK(o.steps[0].replayed_ns == o.steps[0].measured_ns);
}

TEST_CASE("replay: collectives without a size or a group stay at their measured time", "[replay]") {
  // No record_param_comms: no size. And a sized one without "Group size". Neither moves under a
  // scale-out or another interconnect; both are counted and listed as not re-costable.
  std::vector<std::string> e = {step(1, 0, 400), launch(10, 5, 1),
                                kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 20, 20, 100, 1)};
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"replay.dp_scale=8"},
        std::vector<std::string>{"cluster.gpus_per_node=1"}}) {
    const replay::ReplayOutcome o = run_replay("unsized.json", trace(e), sets);
    CHECK(collective_ns(o) == 100 * kUs);
    CHECK(o.imported.stats.get(Stat::collectives_unsized) == 1);
    CHECK(o.collectives_fixed == 1);
    CHECK(o.collectives_recosted == 0);
    REQUIRE(o.explain.size() == 1);
    CHECK(o.explain[0].rule.rfind("not re-costable (no size", 0) == 0);
    const replay::ReplayOutcome g =
        run_replay("nogroup.json", allreduce_trace(1 << 20, -1, 300), sets);
    CHECK(collective_ns(g) == 300 * kUs);
    CHECK(g.imported.stats.get(Stat::collectives_no_group) == 1);
    CHECK(g.collectives_fixed == 1);
  }
}

TEST_CASE("replay: bad scale-out keys are one line naming the key, exit 2", "[replay]") {
  const fs::path in = write("badscale.json", allreduce_trace(1 << 20, 2, 300));
  for (const char* set : {"replay.dp_scale=0", "replay.dp_scale=1.5", "replay.dp_scale=two",
                          "replay.source_gpus_per_node=0"}) {
    const test::CliResult r = test::run_simrun({"replay", in.string(), "--set", set});
    INFO(set << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(std::string(set).substr(0, std::string(set).find('='))) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // 2 ranks x 16 = 32 do not fit 1 node of 8.
  const test::CliResult r = test::run_simrun(
      {"replay", in.string(), "--set", "replay.dp_scale=16", "--set", "cluster.nodes=1"});
  CHECK(r.code == 2);
  CHECK(r.err.find("cluster.nodes") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("replay: simrun sweep takes a trace and sweeps the replay's what-ifs", "[replay]") {
  // The forced-ring 1 GiB all-reduce above, at dp_scale 1 and 2: the GPU busy time is the
  // collective's, 10 ms, then x1.5 (2(p-1)/p from 2 to 4 ranks) within 1 %.
  const fs::path in = write("sweep.json", allreduce_trace(1L << 28, 2, 10000, 2));
  const fs::path csv = scratch() / "sweep.csv";
  const test::CliResult r = test::run_simrun({"sweep", in.string(), "--grid", "replay.dp_scale=1,2",
                                              "--set", "nccl.algo=ring", "-o", csv.string()});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("2 variants replayed") != std::string::npos);
  std::ifstream f(csv);
  std::string header, line;
  std::getline(f, header);
  CHECK(header.rfind("replay.dp_scale,status,step_time_s,vs_base,gpu_busy_s", 0) == 0);
  std::map<std::string, double> busy;
  while (std::getline(f, line)) {
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) c.push_back(x);
    REQUIRE(c.size() >= 5);
    CHECK(c[1] == "ok");
    busy[c[0]] = std::stod(c[4]);
  }
  REQUIRE(busy.size() == 2);
  CHECK(busy["1"] == Approx(0.010).epsilon(1e-6));
  CHECK(busy["2"] / busy["1"] == Approx(1.5).epsilon(0.01));
  // A scenario-only option with a trace: one line, exit 2.
  const test::CliResult bad =
      test::run_simrun({"sweep", in.string(), "--grid", "replay.dp_scale=1,2", "--op-level"});
  CHECK(bad.code == 2);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
}

TEST_CASE("replay: --set cluster=FILE moves the job onto a cluster file's nodes", "[replay]") {
  // scenarios/clusters/dgx_h100.json: 8 H100 a node over NVLink4. The run takes its GPU, the
  // 2-rank all-reduce its links: d' = d x t(DGX H100, 2) / t(A100 node, 2), both times the
  // model's own (the same plans, timed here on the two job clusters the replay reports).
  const std::string file = std::string(CSIM_SOURCE_DIR) + "/scenarios/clusters/dgx_h100.json";
  const replay::ReplayOutcome o =
      run_replay("file.json", allreduce_trace(16 << 20, 2, 3000), {"cluster=" + file});
  CHECK(o.target_gpu == "H100-SXM5-80GB");
  CHECK(o.job_to.gpu.name == "H100-SXM5-80GB");
  CHECK(o.job_to.nodes == 1);
  const core::CommParams params;
  const TimeNs ta = replay::modelled_collective_ns(
      core::Topology(o.job_from), params, core::CollectiveKind::kAllReduce, 2, 64.0 * (1 << 20));
  const TimeNs tb = replay::modelled_collective_ns(
      core::Topology(o.job_to), params, core::CollectiveKind::kAllReduce, 2, 64.0 * (1 << 20));
  REQUIRE(ta != tb);
  CHECK(collective_ns(o) ==
        std::llround(3000e3 * static_cast<double>(tb) / static_cast<double>(ta)));
  // A file that is not a cluster file: one line naming it, exit 2.
  const fs::path in = write("file2.json", allreduce_trace(16 << 20, 2, 3000));
  const test::CliResult r = test::run_simrun(
      {"replay", in.string(), "--set",
       "cluster=" + std::string(CSIM_SOURCE_DIR) + "/scenarios/gpt2_small_8xa100.json"});
  CHECK(r.code == 2);
  CHECK(r.err.find("not a cluster file") != std::string::npos);
}
