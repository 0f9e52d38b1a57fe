// Progress (docs/limits.md, "Progress"; core/progress.hpp, tools/run_progress.hpp): the text of
// every phase's line, and the phases a run reports through an in-process sink: each one begun
// with its total and counted to it, no phase left without a count. Observed through the sink's
// calls, never through the clock.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "backends/common/run_summary.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/per_rank_traces.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"
#include "run/scenario_loader.hpp"
#include "tests/test_support.hpp"
#include "tools/run_progress.hpp"

namespace {

namespace fs = std::filesystem;
using namespace csim;

// Every phase begun, with the count it reached when the next one began (or the run ended).
class Recorder final : public core::Progress {
 public:
  struct Phase {
    std::string name, unit;
    std::int64_t total = 0;
    std::int64_t reached = -1;
  };
  std::vector<Phase> phases;
  // After the work: the last phase's count.
  void close() {
    if (!phases.empty()) phases.back().reached = done();
  }
  const Phase* find(const std::string& name) const {
    for (const Phase& p : phases)
      if (p.name == name && p.total > 0) return &p;
    return nullptr;
  }

 protected:
  void on_phase(const std::string& name, std::int64_t total, const std::string& unit) override {
    if (!phases.empty()) phases.back().reached = ended();
    phases.push_back({name, unit, total, -1});
  }
};

// Each counted phase reached its total; a phase begun without a count (a label for the work before
// the count starts) is followed by the same phase with one: none stays uncounted.
void check_all_counted(const Recorder& rec) {
  REQUIRE_FALSE(rec.phases.empty());
  for (std::size_t i = 0; i < rec.phases.size(); ++i) {
    const Recorder::Phase& p = rec.phases[i];
    INFO("phase " << i << ": " << p.name << " " << p.reached << " of " << p.total << " " << p.unit);
    if (p.total > 0) {
      CHECK(p.reached == p.total);
    } else {
      REQUIRE(i + 1 < rec.phases.size());
      CHECK(rec.phases[i + 1].name == p.name);
      CHECK(rec.phases[i + 1].total > 0);
    }
  }
}

std::vector<std::string> names(const Recorder& rec) {
  std::vector<std::string> out;
  for (const Recorder::Phase& p : rec.phases)
    if (p.total > 0) out.push_back(p.name);
  return out;
}

}  // namespace

TEST_CASE("progress_text: the line of every phase", "[progress]") {
  using app::progress_text;
  // percent = floor(100 x done / total), the counts with thousands separators, the elapsed time
  // to 0.1 s; total 0: the phase and the time only.
  CHECK(progress_text("lowering", 0, 0, "", 0.04) == "lowering (0.0 s)");
  // 1,024 rank-steps (GPT-3 with every rank: dp 16 x tp 8 x pp 8 ranks, one step): 500 of them is
  // 48.8 %, shown 48.
  CHECK(progress_text("lowering", 500, 1024, "rank-steps", 2.25) ==
        "lowering 48 % (500 of 1,024 rank-steps, 2.2 s)");
  CHECK(progress_text("lowering", 3, 4, "steps", 0.5) == "lowering 75 % (3 of 4 steps, 0.5 s)");
  CHECK(progress_text("preparing the simulation", 131072, 4746112, "ops", 6.8) ==
        "preparing the simulation 2 % (131,072 of 4,746,112 ops, 6.8 s)");
  // Two units per op (its issue and its end): 9,492,224 for 4,746,112 ops; 4,746,112 of them is
  // exactly 50 %.
  CHECK(progress_text("simulating", 4746112, 9492224, "op issues and ends", 13.3) ==
        "simulating 50 % (4,746,112 of 9,492,224 op issues and ends, 13.3 s)");
  CHECK(progress_text("analysing memory", 4746112, 4746112, "ops", 16.7) ==
        "analysing memory 100 % (4,746,112 of 4,746,112 ops, 16.7 s)");
  // Two passes per op (the step spans, the events): 9,492,224 for 4,746,112 ops.
  CHECK(progress_text("summarising", 245760, 9492224, "op passes", 17.2) ==
        "summarising 2 % (245,760 of 9,492,224 op passes, 17.2 s)");
  CHECK(progress_text("summarising GPUs", 512, 1024, "GPUs", 18.0) ==
        "summarising GPUs 50 % (512 of 1,024 GPUs, 18.0 s)");
  // Four passes per op: 10,417,664 for 2,604,416 ops; 10,417,663 of them is 99.99999 %, shown
  // 99: 100 % only once every unit is done.
  CHECK(progress_text("building the trace", 10417663, 10417664, "op passes", 13.1) ==
        "building the trace 99 % (10,417,663 of 10,417,664 op passes, 13.1 s)");
  CHECK(progress_text("writing the trace", 1000, 8000, "events", 1.0) ==
        "writing the trace 12 % (1,000 of 8,000 events, 1.0 s)");
  CHECK(progress_text("writing per-rank traces", 1, 8, "files", 1.0) ==
        "writing per-rank traces 12 % (1 of 8 files, 1.0 s)");
  CHECK(progress_text("re-simulating the OOM advice", 2, 6, "changes", 30.0) ==
        "re-simulating the OOM advice 33 % (2 of 6 changes, 30.0 s)");
  CHECK(progress_text("running", 45056, 121344, "ops issued", 3.2) ==
        "running 37 % (45,056 of 121,344 ops issued, 3.2 s)");
  CHECK(progress_text("running", 0, 0, "", 3.2) == "running (3.2 s)");
  // A count past its total (never published, but a reader may race a reset) is shown as the total.
  CHECK(progress_text("simulating", 12, 10, "ops", 1.0) ==
        "simulating 100 % (10 of 10 ops, 1.0 s)");
}

TEST_CASE("progress: a simulated run reports every phase with its total, counted to the end",
          "[progress]") {
  // gpt_pipeline_8xa100: 8 pipeline stages, no dp or tp, so no rank symmetry: 8 ranks lowered
  // one step at a time, steps x ranks rank-steps.
  const core::Scenario sc =
      run::load_scenario(test::scenario_path("gpt_pipeline_8xa100.json"), {}, {"training.steps=2"});
  Recorder rec;
  run::RunRequest rq;
  rq.scenario = &sc;
  rq.control.progress = &rec;
  const run::RunResult r = run::run(rq);
  const auto ops = static_cast<std::int64_t>(r.program.ops.size());
  const fs::path dir = test::fresh_dir("csim_progress_", "sim");
  run::write_trace_file(r, sc, (dir / "t.json").string(), &rec);
  prof::write_per_rank_traces(r.trace, (dir / "ranks").string(), prof::PerRankMirrors::kEveryRank,
                              &rec);
  (void)prof::summarize(r.trace, &rec);
  rec.close();
  check_all_counted(rec);
  CHECK(names(rec) == std::vector<std::string>{"lowering", "preparing the simulation", "simulating",
                                               "analysing memory", "building the trace",
                                               "writing the trace", "writing per-rank traces",
                                               "summarising", "summarising GPUs"});
  // The totals: 2 steps x 8 ranks (one process each) rank-steps; the ops once to prepare, twice
  // to simulate (issue, end), once to analyse, four times to build the trace (the sync plan's
  // fill and pass, the step spans, the events); the trace's events and flows written; a file per
  // GPU process; the
  // trace's events indexed, then its 8 GPUs.
  REQUIRE(r.program.processes.size() == 8);
  CHECK(rec.find("lowering")->total == 2 * 8);
  CHECK(rec.find("lowering")->unit == "rank-steps");
  CHECK(rec.find("preparing the simulation")->total == ops);
  CHECK(rec.find("simulating")->total == 2 * ops);
  CHECK(rec.find("analysing memory")->total == ops);
  CHECK(rec.find("building the trace")->total == 4 * ops);
  CHECK(rec.find("writing the trace")->total ==
        static_cast<std::int64_t>(r.trace.events.size() + r.trace.flows.size()));
  CHECK(rec.find("writing per-rank traces")->total ==
        static_cast<std::int64_t>(r.trace.processes.size()));
  CHECK(rec.find("summarising")->total == static_cast<std::int64_t>(r.trace.events.size()));
  CHECK(rec.find("summarising GPUs")->total == 8);
  fs::remove_all(dir);
}

TEST_CASE("progress: a trace formatted while built is counted when built and when written",
          "[progress]") {
  // single_gpu_linear (strategy single): lowered step by step, 4 steps.
  const core::Scenario sc = run::load_scenario(test::scenario_path("single_gpu_linear.json"));
  Recorder rec;
  run::RunRequest rq;
  rq.scenario = &sc;
  rq.format_trace = true;
  rq.control.progress = &rec;
  const run::RunResult r = run::run(rq);
  REQUIRE(r.trace_formatted);
  const auto ops = static_cast<std::int64_t>(r.program.ops.size());
  const fs::path dir = test::fresh_dir("csim_progress_", "formatted");
  run::write_trace_file(r, sc, (dir / "t.json").string(), &rec);
  // simrun without a trace: the summary from the run (its step spans, then its events collected,
  // by op).
  (void)backend::summarize_run(sc, r.program, r.result, r.memory, &rec);
  rec.close();
  check_all_counted(rec);
  CHECK(rec.find("lowering")->total == sc.training.steps);
  CHECK(rec.find("lowering")->unit == "steps");
  CHECK(rec.find("building the trace")->total == 4 * ops);
  // The streamed trace's events are built again as they are written: counted by op.
  CHECK(rec.find("writing the trace")->total == ops);
  CHECK(rec.find("summarising")->total == 2 * ops);
  CHECK(rec.find("summarising")->unit == "op passes");
  CHECK(rec.find("summarising GPUs")->total == 1);
  fs::remove_all(dir);
}

TEST_CASE("progress: a stand-in real run counts the ops it issues", "[progress]") {
  const core::Scenario sc =
      run::load_scenario(test::scenario_path("single_gpu_linear.json"), {}, {"training.steps=1"});
  Recorder rec;
  run::RunRequest rq;
  rq.scenario = &sc;
  rq.backend = run::Backend::kStandin;
  rq.time_scale = 1e-3;
  rq.control.progress = &rec;
  const run::RunResult r = run::run(rq);
  REQUIRE(r.result.complete);
  rec.close();
  check_all_counted(rec);
  CHECK(names(rec) ==
        std::vector<std::string>{"lowering", "running", "analysing memory", "building the trace"});
  // Launch mode threads: every op of the Program issued in this process.
  CHECK(rec.find("running")->total == static_cast<std::int64_t>(r.program.ops.size()));
}
