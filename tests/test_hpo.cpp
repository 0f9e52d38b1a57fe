// simrun hpo (docs/hpo.md): the search space, the placement simulation, ASHA step by step
// against Li et al. 2020 Algorithm 2, Ray Tune's stopping variant, and the command end to end.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "hpo/curves.hpp"
#include "hpo/schedule.hpp"
#include "hpo/search_space.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "tests/simrun_cli_support.hpp"
#include "tests/test_support.hpp"

using namespace csim;
using Catch::Matchers::Contains;

namespace {

std::vector<hpo::TrialInput> constant_steps(const std::vector<double>& seconds) {
  std::vector<hpo::TrialInput> in;
  for (double s : seconds) in.push_back({round_to_ns(s), false, ""});
  return in;
}

// (trial, rung, start in whole seconds) of every job, in start order.
struct JobRow {
  int trial, rung;
  std::int64_t start_s;
  bool operator==(const JobRow& o) const {
    return trial == o.trial && rung == o.rung && start_s == o.start_s;
  }
};
std::vector<JobRow> jobs_of(const hpo::Schedule& s) {
  std::vector<JobRow> rows;
  for (const hpo::Segment& seg : s.segments)
    rows.push_back({seg.trial, seg.rung, seg.start_ns / kNsPerS});
  return rows;
}

}  // namespace

namespace Catch {
template <>
struct StringMaker<JobRow> {
  static std::string convert(const JobRow& r) {
    return "(trial " + std::to_string(r.trial) + ", r" + std::to_string(r.rung) + ", t " +
           std::to_string(r.start_s) + " s)";
  }
};
}  // namespace Catch

TEST_CASE("search space: KEY=V1,V2 parsing, grid order and seeded random draws", "[hpo]") {
  const hpo::Knob a = hpo::parse_knob("training.global_batch=256,512");
  REQUIRE(a.key == "training.global_batch");
  REQUIRE(a.values == std::vector<std::string>{"256", "512"});
  REQUIRE_THROWS_AS(hpo::parse_knob("training.global_batch"), InputError);
  REQUIRE_THROWS_AS(hpo::parse_knob("k=1,,2"), InputError);
  REQUIRE_THROWS_AS(hpo::parse_knob("k=1,1"), InputError);

  // Grid: last knob fastest; 5 trials over a 2 x 2 grid wrap to the first point.
  const hpo::Knob b = hpo::parse_knob("param.lr=1e-3,1e-4");
  const auto grid = hpo::sample_trials({a, b}, 5, hpo::Sampler::kGrid, 0);
  REQUIRE(hpo::describe(grid[0]) == "training.global_batch=256 param.lr=1e-3");
  REQUIRE(hpo::describe(grid[1]) == "training.global_batch=256 param.lr=1e-4");
  REQUIRE(hpo::describe(grid[2]) == "training.global_batch=512 param.lr=1e-3");
  REQUIRE(hpo::describe(grid[4]) == hpo::describe(grid[0]));
  // param.* knobs never reach the scenario.
  REQUIRE(hpo::scenario_overrides(grid[1]) ==
          std::vector<std::string>{"training.global_batch=256"});
}

TEST_CASE("determinism: the same seed gives the same trials, curves and schedule", "[hpo]") {
  const hpo::Knob a = hpo::parse_knob("x=1,2,3,4,5,6,7,8");
  const auto t1 = hpo::sample_trials({a}, 50, hpo::Sampler::kRandom, 42);
  const auto t2 = hpo::sample_trials({a}, 50, hpo::Sampler::kRandom, 42);
  const auto t3 = hpo::sample_trials({a}, 50, hpo::Sampler::kRandom, 43);
  REQUIRE(t1 == t2);
  REQUIRE(t1 != t3);  // 8^50 draws: equal only by a bug
  // Synthetic curves: the documented ranges, decreasing in r, the same for the same seed.
  for (int t = 0; t < 20; ++t) {
    const hpo::SyntheticCurve c = hpo::synthetic_curve(7, t);
    REQUIRE((c.a >= 0.05 && c.a < 0.5 && c.b >= 0.5 && c.b < 2.0 && c.c >= 0.2 && c.c < 1.0));
    REQUIRE(c.at(10) < c.at(1));
    REQUIRE(hpo::synthetic_curves(7)(t, 5) == c.at(5));
  }
  hpo::SearchOptions o;
  o.cluster = {2, 2, 8};
  o.asha = {1, 3, 27};
  std::vector<hpo::TrialInput> in;
  for (int i = 0; i < 30; ++i) in.push_back({(1 + i % 4) * kNsPerS, false, ""});
  const hpo::Schedule s1 = hpo::simulate_search(in, hpo::synthetic_curves(7), o);
  const hpo::Schedule s2 = hpo::simulate_search(in, hpo::synthetic_curves(7), o);
  REQUIRE(jobs_of(s1) == jobs_of(s2));
  REQUIRE(s1.wall_ns == s2.wall_ns);
  REQUIRE(s1.best_trial == s2.best_trial);
}

TEST_CASE("ASHA promotions follow Li et al. 2020 Algorithm 2 step by step", "[hpo][asha]") {
  // 9 trials, eta = 3, grace_period r = 1, max_t R = 9: rungs r_k = 1, 3, 9 iterations.
  // One worker (one GPU), every step 1 s, no startup: a job to rung 0 lasts 1 s, a promotion to
  // rung 1 (iterations 1 -> 3) 2 s, to rung 2 (3 -> 9) 6 s (training resumes from a checkpoint).
  // Metric after 1 iteration (rung 0), lower is better:
  //   trial  0    1    2    3    4    5    6    7    8
  //   m(1)  .9   .8   .3   .7   .6   .2   .5   .4   .1
  // after 3 iterations (rung 1): trial 2: .12, trial 5: .18, trial 8: .09; trial 8 at 9: .05.
  //
  // get_job() looks from rung K-1 = 1 down to 0 for a configuration in the top
  // floor(|rung k| / eta) of rung k that is not yet promoted, else starts a new one at rung 0:
  //   t=0   rungs empty                                           -> new 0 (r0)        [0, 1]
  //   t=1   r0 {0}: floor(1/3) = 0                                 -> new 1             [1, 2]
  //   t=2   r0 {0,1}: floor(2/3) = 0                               -> new 2             [2, 3]
  //   t=3   r0 {.9,.8,.3}: top 1 = {2}, unpromoted                 -> promote 2 to r1   [3, 5]
  //   t=5   r1 {2}: floor(1/3) = 0; r0 top 1 = {2}, promoted       -> new 3             [5, 6]
  //   t=6   r0 has 4: top 1 = {2}                                  -> new 4             [6, 7]
  //   t=7   r0 has 5: top 1 = {2}                                  -> new 5             [7, 8]
  //   t=8   r0 has 6: top 2 = {5 (.2), 2 (.3)}: 5 unpromoted       -> promote 5 to r1   [8, 10]
  //   t=10  r1 {2,5}: floor(2/3) = 0; r0 top 2 = {5,2} promoted    -> new 6             [10, 11]
  //   t=11  r0 has 7: top 2 = {5,2}                                -> new 7             [11, 12]
  //   t=12  r0 has 8: top 2 = {5,2}                                -> new 8             [12, 13]
  //   t=13  r0 has 9: top 3 = {8 (.1), 5, 2}: 8 unpromoted         -> promote 8 to r1   [13, 15]
  //   t=15  r1 {2: .12, 5: .18, 8: .09}: top 1 = {8}               -> promote 8 to r2   [15, 21]
  //   t=21  r1 top 1 = {8} promoted; r0 top 3 promoted; no new trials left: the search ends.
  // Trial 8 completes (rung 2); 2 and 5 stop at rung 1; 0, 1, 3, 4, 6, 7 at rung 0. Wall 21 s.
  const std::vector<double> m1 = {.9, .8, .3, .7, .6, .2, .5, .4, .1};
  hpo::ScriptedCurves curves;
  for (int t = 0; t < 9; ++t) {
    const double m3 = t == 2 ? .12 : t == 5 ? .18 : t == 8 ? .09 : m1[t];
    const double m9 = t == 8 ? .05 : m3;
    curves.values.push_back({m1[t], m1[t], m3, m3, m3, m3, m3, m3, m9});
  }
  hpo::SearchOptions o;
  o.cluster = {1, 1, 4};
  o.scheduler = hpo::SchedulerKind::kAsha;
  o.asha = {1, 3, 9};
  const hpo::Schedule s =
      hpo::simulate_search(constant_steps(std::vector<double>(9, 1.0)), curves.fn(), o);
  REQUIRE(s.rungs == std::vector<std::int64_t>{1, 3, 9});
  const std::vector<JobRow> expected = {{0, 0, 0},  {1, 0, 1},  {2, 0, 2}, {2, 1, 3},  {3, 0, 5},
                                        {4, 0, 6},  {5, 0, 7},  {5, 1, 8}, {6, 0, 10}, {7, 0, 11},
                                        {8, 0, 12}, {8, 1, 13}, {8, 2, 15}};
  REQUIRE(jobs_of(s) == expected);
  REQUIRE(s.wall_ns == 21 * kNsPerS);
  REQUIRE(s.completed == 1);
  REQUIRE(s.best_trial == 8);
  REQUIRE(s.stopped_early == 8);
  REQUIRE(s.stopped_at_rung == std::vector<int>{6, 2, 0});
  REQUIRE(s.trials[8].iterations == 9);
  REQUIRE(s.trials[2].outcome == hpo::Outcome::kStoppedEarly);
  REQUIRE(s.trials[2].rung == 1);
  // One GPU busy all along: idle = 1 x 21 - 21 = 0.
  REQUIRE(s.gpu_busy_ns == 21 * kNsPerS);
  REQUIRE(s.gpu_idle_ns == 0);

  // The same search on two workers (1 node x 2 GPUs). Jobs that end together are recorded in
  // start order before any worker asks get_job(); free GPUs are filled lowest first.
  //   t=0  GPU0 new 0 [0,1]; GPU1 new 1 [0,1]
  //   t=1  r0 {0,1}: floor(2/3) = 0        GPU0 new 2 [1,2]; GPU1 new 3 [1,2]
  //   t=2  r0 {0..3}: top 1 = {2}          GPU0 promote 2 to r1 [2,4]; GPU1 new 4 [2,3]
  //   t=3  r0 has 5: top 1 = {2} promoted  GPU1 new 5 [3,4]
  //   t=4  r1 {2}; r0 has 6: top 2 = {5,2} GPU0 promote 5 to r1 [4,6]; GPU1 new 6 [4,5]
  //   t=5  r0 has 7: top 2 promoted        GPU1 new 7 [5,6]
  //   t=6  r1 {2,5}: floor(2/3) = 0; r0 has 8: top 2 promoted
  //                                        GPU0 new 8 [6,7]; GPU1 idle (nothing to run)
  //   t=7  r0 has 9: top 3 = {8,5,2}       GPU0 promote 8 to r1 [7,9]
  //   t=9  r1 {2,5,8}: top 1 = {8}         GPU0 promote 8 to r2 [9,15]
  // Wall 15 s; busy = 9 x 1 + 3 x 2 + 6 = 21 GPU-s; idle = 2 x 15 - 21 = 9 GPU-s.
  o.cluster = {1, 2, 4};
  const hpo::Schedule s2 =
      hpo::simulate_search(constant_steps(std::vector<double>(9, 1.0)), curves.fn(), o);
  const std::vector<JobRow> expected2 = {{0, 0, 0}, {1, 0, 0}, {2, 0, 1}, {3, 0, 1}, {2, 1, 2},
                                         {4, 0, 2}, {5, 0, 3}, {5, 1, 4}, {6, 0, 4}, {7, 0, 5},
                                         {8, 0, 6}, {8, 1, 7}, {8, 2, 9}};
  REQUIRE(jobs_of(s2) == expected2);
  REQUIRE(s2.segments[7].gpus == std::vector<int>{0});  // 5 to r1 on the GPU freed first
  REQUIRE(s2.wall_ns == 15 * kNsPerS);
  REQUIRE(s2.gpu_busy_ns == 21 * kNsPerS);
  REQUIRE(s2.gpu_idle_ns == 9 * kNsPerS);
  REQUIRE(s2.best_trial == 8);
}

TEST_CASE("asha-stop follows Ray Tune's AsyncHyperBandScheduler cutoffs", "[hpo][asha]") {
  // numpy.percentile, linear: [1,2,3,4] at 50 -> position 1.5 -> 2.5; at 100 -> 4.
  REQUIRE(hpo::percentile_linear({4, 1, 3, 2}, 50) == 2.5);
  REQUIRE(hpo::percentile_linear({4, 1, 3, 2}, 100) == 4);
  // eta = 2, grace 1, max_t 4: milestones 1, 2 and completion at 4. One GPU, 1 s per step; a
  // continuing trial keeps its GPU. Reward = -metric; cutoff = percentile(rewards recorded at
  // the milestone so far, (1 - 1/2) * 100 = 50); stop when reward < cutoff.
  //   trial 0: r1 m .5, rung 0 empty -> go; r2 m .4, rung 1 empty -> go; completes at t = 4.
  //   trial 1: r1 m .6 at t = 5: cutoff of {-.5} = -.5; -.6 < -.5 -> stopped at rung 0.
  //   trial 2: r1 m .45 at t = 6: cutoff of {-.5, -.6} = -.55; -.45 >= -.55 -> go;
  //            r2 m .42 at t = 7: cutoff of {-.4} = -.4; -.42 < -.4 -> stopped at rung 1.
  hpo::ScriptedCurves c;
  c.values = {{.5, .4, .35, .3}, {.6, .6, .6, .6}, {.45, .42, .42, .42}};
  hpo::SearchOptions o;
  o.cluster = {1, 1, 4};
  o.scheduler = hpo::SchedulerKind::kAshaStop;
  o.asha = {1, 2, 4};
  const hpo::Schedule s = hpo::simulate_search(constant_steps({1, 1, 1}), c.fn(), o);
  REQUIRE(s.rungs == std::vector<std::int64_t>{1, 2, 4});
  const std::vector<JobRow> expected = {{0, 0, 0}, {0, 1, 1}, {0, 2, 2},
                                        {1, 0, 4}, {2, 0, 5}, {2, 1, 6}};
  REQUIRE(jobs_of(s) == expected);
  REQUIRE(s.wall_ns == 7 * kNsPerS);
  REQUIRE(s.trials[0].outcome == hpo::Outcome::kCompleted);
  REQUIRE(s.trials[1].rung == 0);
  REQUIRE(s.trials[2].rung == 1);
  REQUIRE(s.stopped_at_rung == std::vector<int>{1, 1, 0});
}

TEST_CASE("FIFO placement queues trials when CPUs run short", "[hpo][fifo]") {
  // 2 nodes x 2 GPUs, 4 cores per node; a trial takes 1 GPU and 3 cores, so one trial per node
  // (3 + 3 > 4) although 4 GPUs are free. max_t 2 iterations, startup 0.5 s; step times 1..5 s,
  // trial 3 failed (OOM: no time). Job length = 0.5 + 2 x step:
  //   trial 0: 2.5 s, node 0 (GPU 0) [0, 2.5];   trial 1: 4.5 s, node 1 (GPU 2) [0, 4.5]
  //   trial 2: 6.5 s, node 0 at 2.5 -> [2.5, 9]; trial 3 skipped (failed)
  //   trial 4: 10.5 s, node 1 at 4.5 -> [4.5, 15]
  // wall = 15 s; GPU busy = 2.5 + 4.5 + 6.5 + 10.5 = 24 GPU-s; idle = 4 x 15 - 24 = 36 GPU-s.
  std::vector<hpo::TrialInput> in = constant_steps({1, 2, 3, 4, 5});
  in[3].failed = true;
  in[3].failure = "out of memory";
  hpo::SearchOptions o;
  o.cluster = {2, 2, 4};
  o.per_trial = {1, 3};
  o.scheduler = hpo::SchedulerKind::kFifo;
  o.asha.max_t = 2;
  o.startup_ns = kNsPerS / 2;
  const hpo::Schedule s = hpo::simulate_search(in, hpo::synthetic_curves(1), o);
  REQUIRE(s.segments.size() == 4);
  REQUIRE(s.segments[0].gpus == std::vector<int>{0});
  REQUIRE(s.segments[1].gpus == std::vector<int>{2});
  REQUIRE(s.segments[2].gpus == std::vector<int>{0});
  REQUIRE(s.segments[2].start_ns == 2500 * kNsPerMs);
  REQUIRE(s.segments[3].trial == 4);
  REQUIRE(s.segments[3].gpus == std::vector<int>{2});
  REQUIRE(s.segments[3].start_ns == 4500 * kNsPerMs);
  REQUIRE(s.wall_ns == 15 * kNsPerS);
  REQUIRE(s.gpu_busy_ns == 24 * kNsPerS);
  REQUIRE(s.gpu_idle_ns == 36 * kNsPerS);
  REQUIRE(s.completed == 4);
  REQUIRE(s.failed == 1);
  REQUIRE(s.trials[3].outcome == hpo::Outcome::kFailed);
}

TEST_CASE("GPU idle time with multi-GPU and multi-node trials", "[hpo][fifo]") {
  // 1 node x 3 GPUs, 2 GPUs per trial: one trial at a time (GPUs 0, 1), the third GPU never used.
  // 2 trials x 3 iterations x 1 s: wall 6 s; busy = 2 trials x 3 s x 2 GPUs = 12 GPU-s;
  // idle = 3 x 6 - 12 = 6 GPU-s.
  hpo::SearchOptions o;
  o.cluster = {1, 3, 8};
  o.per_trial = {2, 1};
  o.scheduler = hpo::SchedulerKind::kFifo;
  o.asha.max_t = 3;
  hpo::Schedule s = hpo::simulate_search(constant_steps({1, 1}), hpo::synthetic_curves(1), o);
  REQUIRE(s.segments[1].gpus == std::vector<int>{0, 1});
  REQUIRE(s.wall_ns == 6 * kNsPerS);
  REQUIRE(s.gpu_busy_ns == 12 * kNsPerS);
  REQUIRE(s.gpu_idle_ns == 6 * kNsPerS);
  // 3 nodes x 2 GPUs, 4 GPUs per trial: whole nodes 0 and 1, then again after 3 s; node 2 idle.
  // wall 6 s; busy = 2 x 3 s x 4 = 24 GPU-s; idle = 6 x 6 - 24 = 12 GPU-s.
  o.cluster = {3, 2, 8};
  o.per_trial = {4, 2};
  s = hpo::simulate_search(constant_steps({1, 1}), hpo::synthetic_curves(1), o);
  REQUIRE(s.segments[0].gpus == std::vector<int>{0, 1, 2, 3});
  REQUIRE(s.segments[1].start_ns == 3 * kNsPerS);
  REQUIRE(s.gpu_idle_ns == 12 * kNsPerS);
  // A trial that cannot fit the cluster is bad input.
  o.per_trial = {3, 1};
  REQUIRE_THROWS_AS(hpo::simulate_search(constant_steps({1}), hpo::synthetic_curves(1), o),
                    InputError);
}

TEST_CASE("simrun hpo end to end on a bundled scenario", "[hpo][cli]") {
  const auto dir = test::fresh_dir("csim_hpo_", "cli");
  const std::string trace = (dir / "hpo.trace.json").string();
  const std::string results = (dir / "results.json").string();
  const test::CliResult r = test::run_simrun(
      {"hpo", test::scenario_path("mlp_1xh200.json"), "--set", "cluster.gpus_per_node=4", "--space",
       "training.global_batch=4096,8192", "--space", "param.lr=1e-4,3e-4,1e-3", "--trials", "12",
       "--seed", "3", "--max-t", "9", "-o", trace, "--results", results});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE_THAT(r.out, Contains("wall time"));
  REQUIRE_THAT(r.out, Contains("synthetic"));
  REQUIRE_THAT(r.err, Contains("variant 2/2"));  // two batch sizes simulated
  const prof::Trace tr = prof::read_chrome_trace_file(trace);
  REQUIRE(tr.processes.size() == 4);  // one per GPU
  REQUIRE(!tr.events.empty());
  const nlohmann::json j = nlohmann::json::parse(test::read_file(results));
  REQUIRE(j["trials"].size() == 12);
  REQUIRE(j["jobs"].size() == tr.events.size());  // one GPU per trial: one event per job
  REQUIRE(j["totals"]["completed"].get<int>() >= 1);
  // The half batch runs a shorter step on the same GPU.
  double step_4096 = 0, step_8192 = 0;
  for (const auto& t : j["trials"])
    (t["knobs"]["training.global_batch"] == "4096" ? step_4096 : step_8192) =
        t["step_time_s"].get<double>();
  REQUIRE(step_4096 > 0);
  REQUIRE(step_4096 < step_8192);

  // A misspelt knob is bad input that names it.
  const test::CliResult bad =
      test::run_simrun({"hpo", test::scenario_path("mlp_1xh200.json"), "--space",
                        "training.global_bach=1,2", "--trials", "2"});
  REQUIRE(bad.code == 2);
  REQUIRE_THAT(bad.err, Contains("global_bach"));
}
