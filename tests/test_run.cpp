// run/: the scenario loader, RunRequest -> run() -> RunResult (docs/architecture.md, "run/").
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "run/run.hpp"
#include "run/scenario_loader.hpp"
#include "tests/test_support.hpp"

using namespace csim;
namespace fs = std::filesystem;

TEST_CASE("run: backend and launch names round-trip, other names are refused", "[run]") {
  for (run::Backend b : {run::Backend::kSim, run::Backend::kStandin, run::Backend::kCuda}) {
    run::Backend back = run::Backend::kSim;
    REQUIRE(run::parse_backend(run::to_string(b), &back));
    CHECK(back == b);
  }
  for (run::Launch l : {run::Launch::kThreads, run::Launch::kProcesses, run::Launch::kMpi}) {
    run::Launch back = run::Launch::kThreads;
    REQUIRE(run::parse_launch(run::to_string(l), &back));
    CHECK(back == l);
  }
  run::Backend b = run::Backend::kSim;
  CHECK_FALSE(run::parse_backend("gpu", &b));
  run::Launch l = run::Launch::kThreads;
  CHECK_FALSE(run::parse_launch("slurm", &l));
}

TEST_CASE("run: without a trace, the same Program, timings and memory, and no trace", "[run]") {
  const core::Scenario s = run::load_scenario(test::scenario_path("dp_vs_ddp_4x1080ti.json"));
  run::RunRequest rq;
  rq.scenario = &s;
  const run::RunResult with = run::run(rq);
  rq.trace = false;
  const run::RunResult without = run::run(rq);
  CHECK_FALSE(with.trace.events.empty());
  CHECK(without.trace.events.empty());  // build_trace did not run
  REQUIRE(with.result.timings.size() == without.result.timings.size());
  for (std::size_t i = 0; i < with.result.timings.size(); ++i) {
    CHECK(with.result.timings[i].start_ns == without.result.timings[i].start_ns);
    CHECK(with.result.timings[i].end_ns == without.result.timings[i].end_ns);
  }
  REQUIRE(with.memory.gpus.size() == without.memory.gpus.size());
  for (std::size_t g = 0; g < with.memory.gpus.size(); ++g)
    CHECK(with.memory.gpus[g].peak_bytes == without.memory.gpus[g].peak_bytes);
  // The warnings a front end prints are the trace's, whether or not one was built.
  CHECK(with.trace.metadata["warnings"] == nlohmann::json(without.warnings));
}

TEST_CASE("run: launch mode mpi without an MPI launcher is BackendUnavailable", "[run]") {
  const core::Scenario s =
      run::load_scenario(test::scenario_path("linear_5x2_dp2.json"), {}, {"strategy.kind=ddp"});
  run::RunRequest rq;
  rq.scenario = &s;
  rq.backend = run::Backend::kStandin;
  rq.launch = run::Launch::kMpi;  // rq.mpi stays null, as in simview or a build without MPI
  CHECK_THROWS_AS(run::run(rq), BackendUnavailable);
}

TEST_CASE("ScenarioLoader: the file is read once, the later overrides win", "[run]") {
  const fs::path d = test::fresh_dir("csim_run_", "loader");
  const fs::path file = d / "s.json";
  fs::copy_file(test::scenario_path("dp_vs_ddp_4x1080ti.json"), file);
  const run::ScenarioLoader loader =
      run::ScenarioLoader::from_file(file.string(), {}, {"training.global_batch=64"});
  fs::remove(file);  // every variant below comes from the document read when the loader was made
  const core::Scenario base = loader.load();
  CHECK(base.training.global_batch == 64);
  CHECK(base.file == file.string());
  // Extra overrides come after the loader's: the variant's value wins.
  const core::Scenario v = loader.load({"training.global_batch=32", "host.gil=false"});
  CHECK(v.training.global_batch == 32);
  CHECK_FALSE(v.host.gil);
  // A bad variant is an InputError naming its --set; the loader stays usable.
  CHECK_THROWS_AS(loader.load({"training.global_batch=-1"}), InputError);
  CHECK(loader.load().training.global_batch == 64);
  // A copy shares the document; from_document gives the same scenario as from_file.
  const run::ScenarioLoader copy = loader;
  CHECK(&copy.document() == &loader.document());
  const core::Scenario again = run::ScenarioLoader::from_document(loader.document(), file.string(),
                                                                  {}, {"training.global_batch=64"})
                                   .load();
  CHECK(again.training.global_batch == base.training.global_batch);
  CHECK(again.strategy.device_ids == base.strategy.device_ids);
  // A file that is not there fails when the loader is made, as the parser words it.
  CHECK_THROWS_AS(run::ScenarioLoader::from_file(file.string()), InputError);
}
