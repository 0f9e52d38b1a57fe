// The trace checker (profiler/trace_check.hpp; docs/trace-format.md, "Checking a trace"): first
// each rule on a hand-made trace, so that a checker that passes everything cannot pass here; then
// the traces simrun writes, parsed back from the files as tools read them, for every bundled
// scenario, every strategy, the stand-in real backend in launch modes threads, processes and mpi,
// and --per-rank folders (each file self-contained: every launch with its device event).
#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "profiler/trace_check.hpp"
#include "tests/simrun_cli_support.hpp"
#include "tests/test_support.hpp"

namespace fs = std::filesystem;
using csim::prof::check_chrome_trace_file;
using csim::prof::check_chrome_trace_string;
using csim::prof::CheckRule;
using csim::prof::TraceCheckResult;

namespace {

std::size_t count(const TraceCheckResult& r, CheckRule rule) {
  return r.count[static_cast<std::size_t>(rule)];
}

// A small valid trace in our writer's layout: a host thread launching a kernel (ac2g flow from
// the launch's start to the kernel's start, "bp": "e" as Kineto writes it), a step annotation
// enclosing the launch, and a memory counter. `extra` is appended to traceEvents.
std::string trace_with(const std::string& extra = "", const std::string& kernel_ts = "12.0") {
  return R"({"traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "main"}},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1000, "args": {"name": "stream 0"}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 1, "ts": 0.0, "dur": 100.0, "args": {}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 1, "ts": 10.0, "dur": 2.0, "args": {"correlation": 7}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 1000, "ts": )" +
         kernel_ts + R"(, "dur": 5.0, "args": {"correlation": 7}},
    {"ph": "C", "name": "memory", "pid": 0, "ts": 0.0, "args": {"allocated": 1024}},
    {"ph": "s", "id": 7, "pid": 0, "tid": 1, "ts": 10.0, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 7, "pid": 0, "tid": 1000, "ts": )" +
         kernel_ts + R"(, "cat": "ac2g", "name": "ac2g", "bp": "e"})" + extra + "]}";
}

// simrun ARGS in-process; REQUIREs exit 0.
void simrun(std::vector<std::string> args) {
  const csim::test::CliResult r = csim::test::run_simrun(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
}

void check_file(const fs::path& f) {
  const TraceCheckResult r = check_chrome_trace_file(f.string());
  INFO(f.string() << ": " << r.report());
  CHECK(r.ok());
  CHECK(r.slices > 0);
}

std::vector<std::string> rank_files(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Per-rank files: each passes alone, and every device event's launch is in its own file (the
// checker's kLaunchMissing across files); flows are complete in each file by the one-start-one-end
// rule.
void check_per_rank(const fs::path& dir) {
  const std::vector<std::string> files = rank_files(dir);
  REQUIRE(!files.empty());
  const TraceCheckResult r = csim::prof::check_per_rank_files(files);
  INFO(dir.string() << ": " << r.report());
  CHECK(r.ok());
  CHECK(r.launches_checked > 0);
}

}  // namespace

TEST_CASE("trace check: a valid trace passes and each rule catches its defect", "[trace_check]") {
  const TraceCheckResult good = check_chrome_trace_string(trace_with());
  INFO(good.report());
  REQUIRE(good.ok());
  CHECK(good.launches_checked == 1);
  CHECK(good.flows == 1);

  SECTION("an illegal ph") {
    const auto r = check_chrome_trace_string(
        trace_with(R"(, {"ph": "Q", "name": "x", "pid": 0, "tid": 1, "ts": 1.0})"));
    CHECK(count(r, CheckRule::kPhase) == 1);
    // The message names the event.
    CHECK(r.messages.at(0).find("'x' (pid 0, tid 1, ts 1.000)") != std::string::npos);
  }
  SECTION("a negative dur, a ts that is not a number") {
    const auto r = check_chrome_trace_string(
        trace_with(R"(, {"ph": "X", "name": "neg", "pid": 0, "tid": 1, "ts": 50.0, "dur": -1.0},)"
                   R"( {"ph": "X", "name": "str", "pid": 0, "tid": 1, "ts": "5", "dur": 1.0})"));
    CHECK(count(r, CheckRule::kDuration) == 1);
    CHECK(count(r, CheckRule::kTimestamp) == 1);
  }
  SECTION("a pid that is not an integer, a thread without a name") {
    const auto r = check_chrome_trace_string(trace_with(
        R"(, {"ph": "X", "name": "a", "pid": "Spans", "tid": 1, "ts": 50.0, "dur": 1.0},)"
        R"( {"ph": "X", "name": "b", "pid": 0, "tid": 9, "ts": 50.0, "dur": 1.0})"));
    CHECK(count(r, CheckRule::kPidTid) == 1);
    CHECK(count(r, CheckRule::kNaming) == 1);
  }
  SECTION("a counter series that is not a number") {
    const auto r = check_chrome_trace_string(
        trace_with(R"(, {"ph": "C", "name": "memory", "pid": 0, "ts": 1.0, "args": {"x": null}})"));
    CHECK(count(r, CheckRule::kCounter) == 1);
  }
  SECTION("a flow with two ends, a flow end bound to no slice") {
    const auto r = check_chrome_trace_string(trace_with(
        R"(, {"ph": "f", "id": 7, "pid": 0, "tid": 1000, "ts": 13.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},)"
        R"( {"ph": "s", "id": 8, "pid": 0, "tid": 1, "ts": 11.0, "cat": "ac2g", "name": "ac2g"},)"
        R"( {"ph": "f", "id": 8, "pid": 0, "tid": 1000, "ts": 40.0, "cat": "ac2g", "name": "ac2g", "bp": "e"})"));
    CHECK(count(r, CheckRule::kFlowPairing) == 1);
    // ts 40 is after the kernel [12, 17): with "bp": "e" nothing encloses it.
    CHECK(count(r, CheckRule::kFlowBinding) == 1);
  }
  SECTION("a flow start at the very end of a slice is not enclosed by it (half-open slices)") {
    // The launch is [10, 12): a start at 12 binds to the step annotation, not to the launch;
    // on the stream, an end at 17 (the kernel's end) binds to nothing.
    const auto r = check_chrome_trace_string(trace_with(
        R"(, {"ph": "s", "id": 9, "pid": 0, "tid": 1000, "ts": 17.0, "cat": "dep", "name": "dep"},)"
        R"( {"ph": "f", "id": 9, "pid": 0, "tid": 1000, "ts": 17.0, "cat": "dep", "name": "dep", "bp": "e"})"));
    CHECK(count(r, CheckRule::kFlowBinding) == 2);
  }
  SECTION("slices overlapping without nesting, an E without B") {
    const auto r = check_chrome_trace_string(trace_with(
        R"(, {"ph": "X", "name": "over", "pid": 0, "tid": 1, "ts": 90.0, "dur": 20.0, "args": {}},)"
        R"( {"ph": "E", "name": "e", "pid": 0, "tid": 1, "ts": 120.0})"));
    CHECK(count(r, CheckRule::kNesting) == 2);
  }
  SECTION("a kernel starting before its launch") {
    // The kernel at 9 µs, its launch at 10 µs; the flow's end (at the kernel) is then before its
    // start too.
    const auto r = check_chrome_trace_string(trace_with("", "9.0"));
    CHECK(count(r, CheckRule::kCausality) == 1);
    CHECK(count(r, CheckRule::kFlowOrder) == 1);
    CHECK(r.messages.size() == 2);
  }
  SECTION("not a trace") {
    CHECK(count(check_chrome_trace_string("{\"traceEvents\": 3}"), CheckRule::kJson) == 1);
    CHECK(count(check_chrome_trace_string("[{\"ph\": "), CheckRule::kJson) == 1);
  }
}

TEST_CASE("trace check: per-rank files with a launch in another rank's file fail",
          "[trace_check]") {
  // What --per-rank wrote for DataParallel before: the kernel in rank 1, its launch in rank 0.
  const fs::path d = csim::test::fresh_dir("csim_trace_check_", "split");
  const std::string head =
      R"({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},)"
      R"({"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "GPU 1"}},)"
      R"({"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "main"}},)"
      R"({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1002, "args": {"name": "stream 2"}})";
  {
    std::FILE* f = std::fopen((d / "rank-0.json").c_str(), "w");
    std::fputs(
        (head +
         R"(, {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 1, "ts": 1.0, "dur": 1.0, "args": {"correlation": 5}}]})")
            .c_str(),
        f);
    std::fclose(f);
    f = std::fopen((d / "rank-1.json").c_str(), "w");
    std::fputs(
        (head +
         R"(, {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 1002, "ts": 3.0, "dur": 1.0, "args": {"correlation": 5}}]})")
            .c_str(),
        f);
    std::fclose(f);
  }
  const TraceCheckResult r = csim::prof::check_per_rank_files(rank_files(d));
  INFO(r.report());
  CHECK(count(r, CheckRule::kLaunchMissing) == 1);
}

// Every bundled scenario as simrun writes it. The large 3D runs are cut down (fewer layers or
// micro-batches: the same strategy and schedule, a smaller trace) and multi-step ones run two
// steps, so the whole case stays a few seconds; rank symmetry stays as the scenario has it.
TEST_CASE("trace check: every bundled scenario's trace passes", "[trace_check][scenarios]") {
  const std::map<std::string, std::vector<std::string>> reduce = {
      {"gpt3_175b_1024xa100_3d.json", {"model.gpt.layers=16"}},
      {"gpt_1t_3072xa100_3d.json", {"model.gpt.layers=64", "training.global_batch=6"}},
      {"gpt_20b_64xa100_3d.json", {"training.global_batch=16"}},
      {"llama3_70b_512xh100_3d.json", {"training.global_batch=64"}},
      {"gpt_pipeline_8xa100.json", {"training.global_batch=8"}},
      // dp 2 x 8 micro-batches: the fewest the interleaved schedule takes at pp 8 (64 in the file).
      {"mbridge2509_llama3_70b_h100_64gpu.json", {"training.global_batch=16"}},
      // dp 8: 2 micro-batches per GPU in place of 16.
      {"mbridge2509_llama3_8b_h100_8gpu.json", {"training.global_batch=16"}},
      // Expert parallelism: dp 8 x micro-batch 2 x 2 micro-batches (a multiple of pp 2) in place
      // of 32 (16 ranks simulated: edp 1, no mirror); Mixtral's dp 16 at 4 micro-batches.
      {"mbridge2509_qwen3_30b_a3b_h100_16gpu.json", {"training.global_batch=32"}},
      {"qwen3_30b_a3b_16xh100_ep8_zipf.json", {"training.global_batch=32"}},
      {"mixtral_8x7b_64xh100_ep8.json", {"training.global_batch=64"}},
      // DeepSeek-V3: dp 128 x 2 micro-batches in place of 120, in 1F1B with the all-to-alls in
      // line and one block on the last stage (DualPipeV needs 2 pp = 32 micro-batches, a 315 MB
      // trace: its own case is in "every strategy's trace passes"); the interleaved layout's
      // dp 64 x 8 micro-batches (the fewest at pp 8) in place of 128.
      {"deepseek_v3_2048xh800_pp16_ep64.json",
       {"training.global_batch=256", "strategy.schedule=1f1b", "strategy.moe_a2a_overlap=none",
        "strategy.stage_layers=[4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1]"}},
      {"deepseek_v3_1024xh100_mbridge_tp2_pp8_ep64.json", {"training.global_batch=512"}},
      // GPT-OSS-120B: dp 16 x 4 micro-batches in place of 16.
      {"gpt_oss_120b_64xh100_ep8.json", {"training.global_batch=64"}},
  };
  const fs::path d = csim::test::fresh_dir("csim_trace_check_", "scenarios");
  for (const auto& entry : fs::directory_iterator(csim::test::repo_path("scenarios"))) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().filename().string();
    DYNAMIC_SECTION(name) {
      std::vector<std::string> args = {entry.path().string(), "-q", "--set", "training.steps=2"};
      if (const auto it = reduce.find(name); it != reduce.end()) {
        for (const std::string& s : it->second) args.insert(args.end(), {"--set", s});
      }
      const fs::path out = d / (entry.path().stem().string() + ".json");
      args.insert(args.end(), {"-o", out.string()});
      simrun(args);
      check_file(out);
    }
  }
}

// Every strategy on a small scenario that makes it valid (the scenario files above cover the
// bundled configurations; these cover the strategies those files do not, tensor_parallel and
// ZeRO stages 1 and 2, and the ones they do on a second model).
TEST_CASE("trace check: every strategy's trace passes", "[trace_check][strategies]") {
  struct Case {
    const char* label;
    const char* scenario;
    std::vector<std::string> sets;
  };
  const std::vector<Case> cases = {
      {"single", "mlp_1xh200.json", {}},
      {"data_parallel", "linear_5x2_dp4.json", {}},
      {"ddp", "linear_5x2_dp2.json", {"strategy.kind=ddp"}},
      {"model_parallel", "resnet50_model_parallel_2gpu.json", {}},
      {"pipeline", "gpt_pipeline_8xa100.json", {"training.global_batch=8"}},
      // GPT-2 small has 12 heads: tp 4 divides them; 8 GPUs = tp 4 x dp 2.
      {"tensor_parallel",
       "gpt2_small_8xa100.json",
       {"strategy.kind=tensor_parallel", "strategy.tp=4", "strategy.dp=2"}},
      {"3d", "gpt_20b_64xa100_3d.json", {"training.global_batch=16"}},
      {"zero1", "gpt2_small_8xa100.json", {"strategy.kind=zero", "strategy.zero_stage=1"}},
      {"zero2", "gpt2_small_8xa100.json", {"strategy.kind=zero", "strategy.zero_stage=2"}},
      {"zero3", "gpt_20b_64xa100_zero3.json", {}},
      {"fsdp", "llama3_8b_64xh100_fsdp.json", {}},
      // DualPipeV with its F&B pairs overlapping the EP all-to-alls (the bundled DeepSeek-V3
      // layout's schedule) on Qwen3-30B-A3B's pp 2 x dp 8 x ep 8: 64 / (8 x MBS 2) = 4 = 2 pp
      // micro-batches, the fewest DualPipeV takes.
      {"dualpipev",
       "qwen3_30b_a3b_16xh100_ep8_zipf.json",
       {"training.global_batch=64", "strategy.schedule=dualpipev", "strategy.virtual_stages=2",
        "strategy.moe_a2a_overlap=1f1b"}},
  };
  const fs::path d = csim::test::fresh_dir("csim_trace_check_", "strategies");
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.label) {
      std::vector<std::string> args = {csim::test::scenario_path(c.scenario), "-q", "--set",
                                       "training.steps=2"};
      for (const std::string& s : c.sets) args.insert(args.end(), {"--set", s});
      const fs::path out = d / (std::string(c.label) + ".json");
      args.insert(args.end(), {"-o", out.string()});
      simrun(args);
      check_file(out);
    }
  }
}

// The stand-in real backend: measured host times and stand-in stream times, merged across
// processes in launch modes processes and mpi. Whatever the machine's speed, every device event
// follows its launch (clamped where the measured order is off, with the residual in metadata).
TEST_CASE("trace check: stand-in traces in launch modes threads and processes pass",
          "[trace_check][real]") {
  const fs::path d = csim::test::fresh_dir("csim_trace_check_", "standin");
  const std::string dp2 = csim::test::scenario_path("linear_5x2_dp2.json");
  SECTION("threads, DataParallel") {
    simrun({dp2, "-q", "--backend", "standin", "-o", (d / "dp_threads.json").string()});
    check_file(d / "dp_threads.json");
  }
  SECTION("threads, DDP") {
    simrun({dp2, "-q", "--set", "strategy.kind=ddp", "--backend", "standin", "-o",
            (d / "ddp_threads.json").string()});
    check_file(d / "ddp_threads.json");
  }
  SECTION("processes, DDP") {
    simrun({dp2, "-q", "--set", "strategy.kind=ddp", "--backend", "standin", "--launch",
            "processes", "-o", (d / "ddp_processes.json").string(), "--per-rank",
            (d / "ddp_processes_ranks").string()});
    check_file(d / "ddp_processes.json");
    check_per_rank(d / "ddp_processes_ranks");
    const std::string t = csim::test::read_file((d / "ddp_processes.json").string());
    CHECK(t.find("\"clock_alignment_residual_ns_max\": ") != std::string::npos);
  }
}

#ifdef CSIM_MPIRUN
TEST_CASE("trace check: stand-in trace in launch mode mpi passes", "[trace_check][real][mpi]") {
  // As tests/test_mpi_launch.cpp runs it: the built simrun under the real mpirun, oversubscribed.
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  const fs::path d = csim::test::fresh_dir("csim_trace_check_", "mpi");
  const std::string cmd = std::string(CSIM_MPIRUN) + " --allow-run-as-root --oversubscribe -np 2 " +
                          CSIM_SIMRUN + " " + csim::test::scenario_path("linear_5x2_dp2.json") +
                          " --set strategy.kind=ddp --backend standin --launch mpi -q -o " +
                          (d / "mpi.json").string() + " > " + (d / "log.txt").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  INFO(csim::test::read_file((d / "log.txt").string()));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  check_file(d / "mpi.json");
}
#endif

// --per-rank (docs/trace-format.md, "Per-rank files"): DataParallel is one process whose main
// thread launches on every GPU; each GPU's file holds the launches of its device events.
TEST_CASE("trace check: --per-rank files are self-contained", "[trace_check][per_rank]") {
  const fs::path d = csim::test::fresh_dir("csim_trace_check_", "per_rank");
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"data_parallel", {csim::test::scenario_path("dp_vs_ddp_4x1080ti.json")}},
      {"data_parallel_linear", {csim::test::scenario_path("linear_5x2_dp4.json")}},
      {"ddp", {csim::test::scenario_path("dp_vs_ddp_4x1080ti.json"), "--set", "strategy.kind=ddp"}},
      {"3d",
       {csim::test::scenario_path("gpt_20b_64xa100_3d.json"), "--set", "training.global_batch=16"}},
  };
  for (const auto& [label, base] : runs) {
    DYNAMIC_SECTION(label) {
      std::vector<std::string> args = base;
      args.insert(args.end(),
                  {"-q", "--set", "training.steps=2", "--per-rank", (d / label).string()});
      simrun(args);
      check_per_rank(d / label);
    }
  }
}
