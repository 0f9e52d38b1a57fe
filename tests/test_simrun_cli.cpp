// simrun's command line end to end, in-process: exit codes, outputs written atomically, nothing
// written on bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "run/run.hpp"
#include "tests/simrun_cli_support.hpp"
#include "tests/test_support.hpp"
#include "tools/simrun_app.hpp"

using namespace csim;
namespace fs = std::filesystem;

namespace {

using Result = test::CliResult;

Result simrun(const std::vector<std::string>& args) {
  return test::run_simrun(args);
}

fs::path fresh_dir(const std::string& name) {
  return test::fresh_dir("csim_cli_", name);
}

}  // namespace

TEST_CASE("simrun --help documents options and exit codes", "[cli]") {
  const Result r = simrun({"--help"});
  CHECK(r.code == 0);
  CHECK(r.out.find("--per-rank") != std::string::npos);
  CHECK(r.out.find("130") != std::string::npos);
  CHECK(r.out.find("--fail-on-oom") != std::string::npos);
}

TEST_CASE("simrun writes the trace, per-rank traces and the summary", "[cli]") {
  const fs::path d = fresh_dir("ok");
  const Result r =
      simrun({test::scenario_path("linear_5x2_dp2.json"), "-o", (d / "t.json").string(),
              "--per-rank", (d / "ranks").string(), "--summary", (d / "s.json").string()});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("step") != std::string::npos);
  CHECK(fs::exists(d / "t.json"));
  CHECK(fs::exists(d / "s.json"));
  CHECK(fs::exists(d / "ranks" / "rank-0.json"));
  CHECK(fs::exists(d / "ranks" / "rank-1.json"));
  const std::string summary = test::read_file((d / "s.json").string());
  for (const char* key : {"\"step_time_s\": ", "\"samples_per_s\": ", "\"imbalance\": ",
                          "\"oom\": ", "\"per_gpu\": "}) {
    CHECK(summary.find(key) != std::string::npos);
  }
  // the per-rank file says which rank it is, with a space after the colon
  CHECK(test::read_file((d / "ranks" / "rank-1.json").string()).find("\"rank\": 1") !=
        std::string::npos);
  // no temporaries left behind
  for (const auto& e : fs::recursive_directory_iterator(d))
    CHECK(e.path().string().find(".tmp") == std::string::npos);
}

TEST_CASE("simrun's summary without a trace is the trace's summary", "[cli][run_summary]") {
  // Without -o the summary comes from the op timings (backend::summarize_run); with -o from the
  // trace it writes. Expected: the same printed table and the same summary file, byte for byte,
  // on a DDP run, a GIL-bound DataParallel run and a pipeline of two steps.
  for (const char* file :
       {"gpt2_small_8xa100.json", "mlp_gil_4x1080ti.json", "gpt_pipeline_8xa100.json"}) {
    INFO(file);
    const fs::path d = fresh_dir("lean");
    const Result lean = simrun({test::scenario_path(file), "--summary", (d / "a.json").string()});
    const Result full = simrun({test::scenario_path(file), "--summary", (d / "b.json").string(),
                                "-o", (d / "t.json").string()});
    REQUIRE(lean.code == 0);
    REQUIRE(full.code == 0);
    CHECK(lean.out == full.out);
    CHECK(test::read_file((d / "a.json").string()) == test::read_file((d / "b.json").string()));
  }
}

TEST_CASE("bad input: exit 2, one line naming the problem, nothing written", "[cli]") {
  const fs::path d = fresh_dir("bad");
  const Result r = simrun({test::scenario_path("linear_5x2_dp2.json"), "--set",
                           "strategy.kind=ddpp", "-o", (d / "t.json").string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("strategy.kind") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "t.json"));
  const Result missing = simrun({(d / "nope.json").string()});
  CHECK(missing.code == 2);
  const Result unknown_opt = simrun({test::scenario_path("linear_5x2_dp2.json"), "--frobnicate"});
  CHECK(unknown_opt.code == 2);
}

TEST_CASE("the cuda backend is reported unavailable with exit 3", "[cli]") {
  const Result r = simrun({test::scenario_path("linear_5x2_dp2.json"), "--backend", "cuda"});
  CHECK(r.code == 3);
  CHECK(r.err.find("unavailable") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line, no stack of errors
}

TEST_CASE("simrun --launch mpi without the MPI module is exit 3, one line naming it", "[cli]") {
  // Under mpirun (its environment, as backends/mpi/mpi_launcher.cpp started_by_mpirun reads it) the
  // MPI module is looked for at $CSIM_MPI_MODULE first (backends/mpi/mpi_comm.hpp): pointed at
  // nothing, MPI cannot start. (A build without MPI says "not part of this build", also exit 3.)
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("CSIM_MPI_MODULE", "/nonexistent/libcsim_mpi_backend.so", 1);
  const Result r = simrun({test::scenario_path("dp_vs_ddp_4x1080ti.json"), "--set",
                           "strategy.kind=ddp", "--set", "training.data_loader.num_workers=0",
                           "--backend", "standin", "--launch", "mpi", "-q"});
  unsetenv("CSIM_MPI_MODULE");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  INFO(r.err);
  CHECK(r.code == 3);
  const bool built = r.err.find("not part of this build") == std::string::npos;
  if (built) CHECK(r.err.find("/nonexistent/libcsim_mpi_backend.so") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("simrun --backend cuda without the CUDA module is exit 3, one line naming it", "[cli]") {
  // The module is looked for once per process, at $CSIM_CUDA_MODULE first (run/cuda_loader.hpp):
  // pointed at nothing, the run cannot start. (A build without the CUDA backend says so instead.)
  setenv("CSIM_CUDA_MODULE", "/nonexistent/libcsim_cuda_backend.so", 1);
  const Result r = simrun({test::scenario_path("single_gpu_linear.json"), "--set",
                           "cluster.gpu=H200-SXM-141GB", "--backend", "cuda", "-q"});
  unsetenv("CSIM_CUDA_MODULE");
  INFO(r.err);
  CHECK(r.code == 3);
  const bool built = r.err.find("not part of this build") == std::string::npos;
  if (built) CHECK(r.err.find("/nonexistent/libcsim_cuda_backend.so") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("a rank without a GPU in launch mode processes is exit 3, not a failed run", "[cli]") {
  // Each rank process opens its own CUDA runtime; here every one of them finds no GPU. That is the
  // backend being unavailable (exit 3, one line naming the rank, nothing written), not a run that
  // failed part way (exit 5 with a partial trace). On a machine with a GPU the run itself goes
  // ahead, which the GPU check covers.
  if (run::cuda_status_line().find("CUDA device(s)") != std::string::npos) return;
  const fs::path d = fresh_dir("procs_cuda");
  const Result r = simrun({test::scenario_path("linear_5x2_dp2.json"), "--set", "strategy.kind=ddp",
                           "--set", "cluster.gpu=H200-SXM-141GB", "--backend", "cuda", "--launch",
                           "processes", "-o", (d / "t.json").string()});
  INFO(r.err);
  CHECK(r.code == 3);
  // A build without the CUDA backend says so before starting the ranks, and so does one whose
  // module this process did not load (looked for once per process: an earlier case of this binary
  // may have pointed $CSIM_CUDA_MODULE at nothing); where the module loaded, the error names the
  // rank.
  const std::string status = run::cuda_status_line();
  const bool module_loaded = status.find("not part of this build") == std::string::npos &&
                             status.find(" is not found") == std::string::npos &&
                             status.find("is not this build's") == std::string::npos;
  if (module_loaded) CHECK(r.err.find("rank ") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(d / "t.json"));
}

TEST_CASE("simrun --backend standin runs the real executor and labels the trace", "[cli][real]") {
  const fs::path d = fresh_dir("standin");
  const Result r = simrun({test::scenario_path("linear_5x2_dp2.json"), "--backend", "standin", "-o",
                           (d / "t.json").string()});
  CHECK(r.code == 0);
  CHECK(r.out.find("not a measurement") != std::string::npos);
  const std::string trace = test::read_file((d / "t.json").string());
  CHECK(trace.find("\"backend\": \"cpu-standin\"") != std::string::npos);
  CHECK(trace.find("\"measured\": false") != std::string::npos);
  // One process per DDP rank: the trace records the launch and each rank's clock offset.
  const Result procs =
      simrun({test::scenario_path("linear_5x2_dp2.json"), "--set", "strategy.kind=ddp", "--backend",
              "standin", "--launch", "processes", "-o", (d / "p.json").string()});
  CHECK(procs.code == 0);
  const std::string ptrace = test::read_file((d / "p.json").string());
  CHECK(ptrace.find("\"launch\": \"processes\"") != std::string::npos);
  CHECK(ptrace.find("\"clock_sync\"") != std::string::npos);
  // Launch mode mpi outside mpirun is bad input (exit 2) with the mpirun line to use (or, in a
  // build without MPI, backend unavailable: exit 3), never a singleton MPI start.
  const Result mpi = simrun(
      {test::scenario_path("linear_5x2_dp2.json"), "--backend", "standin", "--launch", "mpi"});
  INFO(mpi.err);
  CHECK((mpi.code == 2 || mpi.code == 3));
  CHECK(mpi.err.find("mpi") != std::string::npos);
}

TEST_CASE("launch mode processes without its rank executable is one line of bad input",
          "[cli][real]") {
  // The ranks are started by exec of csim-rank; $CSIM_RANK_EXE names it instead of the search
  // (run/rank_main.hpp). A path that is not there: exit 2, one line naming --launch and the
  // path, nothing written. (CTest runs each case in a process of its own: the variable set here
  // reaches no other case.)
  const fs::path d = fresh_dir("procs_no_rank");
  ::setenv("CSIM_RANK_EXE", "/nonexistent/csim-rank", 1);
  const Result r =
      simrun({test::scenario_path("linear_5x2_dp2.json"), "--set", "strategy.kind=ddp", "--backend",
              "standin", "--launch", "processes", "-o", (d / "p.json").string()});
  ::unsetenv("CSIM_RANK_EXE");
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("--launch") != std::string::npos);
  CHECK(r.err.find("/nonexistent/csim-rank") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(d / "p.json"));
}

TEST_CASE("an OOM verdict comes with re-simulated advice whose first fix really fits",
          "[cli][memory]") {
  // DataParallel ResNet-50 on 4 GTX 1080 Ti with batch 512 (128 per replica): activations of
  // about 80 MB per sample in fp32 put each GPU at about 10.5 GiB of its 10.6 usable, and GPU 0
  // (device_ids[0], which also holds the gathered outputs) goes over.
  const std::vector<std::string> base = {test::scenario_path("dp_vs_ddp_4x1080ti.json"), "--set",
                                         "training.global_batch=512", "--set", "training.steps=2"};
  const Result r = simrun(base);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("OOM advice") != std::string::npos);
  // Gradient accumulation 2 halves the micro-batch and so the activations (~54 % full): it must
  // be offered and marked as fitting.
  CHECK(r.out.find("gradient accumulation 2") != std::string::npos);
  // The "try:" line is the fastest fitting change; applying it must clear the OOM verdict.
  const auto at = r.out.find("  try:");
  REQUIRE(at != std::string::npos);
  std::vector<std::string> args = base;
  std::istringstream line(r.out.substr(at + 6, r.out.find('\n', at) - at - 6));
  for (std::string word; line >> word;) args.push_back(word);
  args.push_back("--fail-on-oom");
  args.push_back("-q");
  const Result fixed = simrun(args);
  INFO(fixed.err);
  CHECK(fixed.code == 0);  // 4 would mean the advised change still does not fit
  // --no-advice skips the re-simulations.
  std::vector<std::string> quiet = base;
  quiet.push_back("--no-advice");
  CHECK(simrun(quiet).out.find("OOM advice") == std::string::npos);
}

TEST_CASE("OOM advice offers more expert parallelism for a mixture of experts", "[cli][memory]") {
  // Mixtral 8x7B on 64 H100 with every expert on every rank (ep 1) and no sharded optimizer: each
  // GPU holds a quarter of 46.7 B parameters (pp 4) with their fp32 gradients and Adam state,
  // about 2.5x its memory. Twice the EP ranks hold 4 of the 8 experts each: offered, re-simulated
  // and smaller (each rank's expert states halve).
  const Result r = simrun({test::scenario_path("mixtral_8x7b_64xh100_ep8.json"), "--set",
                           "strategy.ep=1", "--set", "strategy.distributed_optimizer=false",
                           "--set", "training.global_batch=64", "--set", "training.steps=2"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("expert parallelism 1 -> 2 (4 experts per GPU)") != std::string::npos);
}

TEST_CASE("simrun --fail-on-oom exits 4 and names the GPU, op and shortfall", "[cli][memory]") {
  // ResNet-50 with a batch of 4096 on one 11 GB GTX 1080 Ti: activations alone are ~100 MB per
  // sample in fp32, far beyond 11 GB, so the verdict must be an OOM.
  const fs::path d = fresh_dir("oom");
  const Result r =
      simrun({test::scenario_path("dp_vs_ddp_4x1080ti.json"), "--set", "strategy.kind=single",
              "--set", "strategy.device_ids=[0]", "--set", "training.global_batch=4096", "--set",
              "training.steps=1", "--fail-on-oom", "--summary", (d / "s.json").string()});
  INFO(r.out << r.err);
  CHECK(r.code == 4);
  CHECK(r.out.find("OOM") != std::string::npos);
  const std::string summary = test::read_file((d / "s.json").string());
  CHECK(summary.find("\"shortfall_bytes\": ") != std::string::npos);
}

TEST_CASE("simrun compare: per GPU and op class, both traces written", "[cli][real]") {
  // single_gpu_linear: one GPU, so every row is GPU 0; the stand-in runs each stream op for its
  // simulated time x 5 (plus sleep latency), so every stream-op class shows a ratio of at least 5.
  const fs::path d = fresh_dir("compare");
  const std::string prefix = (d / "run").string();
  const Result r = simrun({"compare", test::scenario_path("single_gpu_linear.json"), "--backend",
                           "standin", "--time-scale", "5", "-o", prefix});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("simulated vs cpu-standin") != std::string::npos);
  CHECK(r.out.find("0     gemm") != std::string::npos);
  CHECK(r.out.find("largest ops") != std::string::npos);
  CHECK(fs::exists(prefix + ".sim.json"));
  CHECK(fs::exists(prefix + ".cpu-standin.json"));
  const Result bad =
      simrun({"compare", test::scenario_path("single_gpu_linear.json"), "--backend", "sim"});
  CHECK(bad.code == 2);  // compare needs a real backend
}

TEST_CASE("simrun --ranks runs one GPU's ops with the rest simulated", "[cli][real]") {
  // GPU 3 of the 8-GPU pipeline: its own kernels run (here on the stand-in, 1/1000 of their
  // simulated time), its sends and receives become their simulated durations.
  const fs::path d = fresh_dir("ranks");
  const Result r = simrun({test::scenario_path("gpt_pipeline_8xa100.json"), "--backend", "standin",
                           "--ranks", "3", "--time-scale", "0.001", "-o", (d / "r.json").string()});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("GPU 3 alone") != std::string::npos);
  const std::string trace = test::read_file((d / "r.json").string());
  CHECK(trace.find("\"rank_slice\"") != std::string::npos);
  CHECK(trace.find("simulated_elsewhere_ns") != std::string::npos);
  const Result sim = simrun({test::scenario_path("gpt_pipeline_8xa100.json"), "--ranks", "3"});
  CHECK(sim.code == 2);  // --ranks needs a real backend
  const Result far = simrun(
      {test::scenario_path("gpt_pipeline_8xa100.json"), "--backend", "standin", "--ranks", "99"});
  CHECK(far.code == 2);
  CHECK(far.err.find("--ranks") != std::string::npos);
}

TEST_CASE("simrun --per-rank on a symmetric run: every rank, or the representatives said aloud",
          "[cli]") {
  // llama3_1_8b_8xh100_fsdp2: FSDP2 over 8 GPUs, simulated as 1 representative standing for 8.
  const std::string scen = test::scenario_path("llama3_1_8b_8xh100_fsdp2.json");
  const fs::path d = fresh_dir("per_rank_sym");
  Result r = simrun({scen, "-q", "--per-rank", (d / "all").string()});
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (int k = 0; k < 8; ++k)
    CHECK(fs::exists(d / "all" / ("rank-" + std::to_string(k) + ".json")));
  // Every rank's files above limits.max_per_rank_events: refused before simulating (exit 2,
  // nothing written), the hint naming the representatives. The files are estimated (docs/limits.md,
  // "Per-rank files") at 3 steps x 1 micro-batch x (355 layers + 4) x 8 replicas x 16 = 137,856
  // events, 21 MB at 150 bytes each...
  r = simrun({scen, "-q", "--per-rank", (d / "refused").string(), "--set",
              "limits.max_per_rank_events=1000"});
  CHECK(r.code == 2);
  CHECK(r.err.find("limits.max_per_rank_events") != std::string::npos);
  CHECK(r.err.find("about 137856 events") != std::string::npos);
  CHECK(r.err.find("about 21 MB of JSON in 8 files") != std::string::npos);
  CHECK(r.err.find("--per-rank-representatives writes the 1 simulated GPUs' files") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(d / "refused"));
  // ...which --per-rank-representatives writes as one file, saying on stderr, even with -q, the
  // ranks it stands for.
  r = simrun({scen, "-q", "--per-rank", (d / "reps").string(), "--per-rank-representatives"});
  REQUIRE(r.code == 0);
  CHECK(fs::exists(d / "reps" / "rank-0.json"));
  CHECK_FALSE(fs::exists(d / "reps" / "rank-1.json"));
  CHECK(r.err.find("1 files in " + (d / "reps").string() +
                   " for 8 ranks: rank-0.json stands for ranks 0-7") != std::string::npos);
  fs::remove_all(d);
}
