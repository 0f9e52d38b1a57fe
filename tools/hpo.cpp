// simrun hpo (docs/hpo.md): wiring only; the search space, curves and schedulers live in
// hpo/. Index: [SECTION] Step times, [SECTION] Trace, [SECTION] Report, [SECTION] Command
#include "tools/hpo.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "core/error.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/summary.hpp"
#include "run/scenario_loader.hpp"
#include "sweep/evaluate.hpp"
#include "tools/signals.hpp"
#include "tools/simrun_app.hpp"

namespace csim::app {
namespace {

// Ctrl-C while the variants are simulated: nothing is written, simrun hpo exits 130.
struct Interrupted {};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// [SECTION] Step times ---------------------------------------------------------------------------

// One step time per distinct combination of scenario knobs (param.* knobs do not reach the
// scenario, so trials differing only in them share a simulation). A variant that does not fit in
// memory, or whose simulation is cancelled, is a failed trial.
std::vector<hpo::TrialInput> step_times(const run::ScenarioLoader& loader,
                                        const std::vector<std::string>& base_sets,
                                        const std::vector<hpo::Assignment>& trials,
                                        std::ostream& err) {
  std::map<std::vector<std::string>, hpo::TrialInput> cache;
  std::vector<std::vector<std::string>> order;
  for (const hpo::Assignment& a : trials) {
    std::vector<std::string> sets = base_sets;
    for (const std::string& s : hpo::scenario_overrides(a)) sets.push_back(s);
    if (cache.emplace(sets, hpo::TrialInput{}).second) order.push_back(sets);
  }
  // Parse every variant first: a bad --space key or value fails before any simulation.
  std::vector<core::Scenario> variants;
  for (const auto& sets : order) variants.push_back(loader.load(sets));
  core::RunControl control;
  control.cancel = cancel_flag();
  for (std::size_t i = 0; i < order.size(); ++i) {
    hpo::TrialInput& in = cache[order[i]];
    // The sweep's evaluation: the summary's step time without building a trace (docs/sweep.md).
    const sweep::VariantResult run = sweep::evaluate_scenario(variants[i], control);
    if (run.status == sweep::VariantStatus::kFailed) {
      if (cancel_flag()->load()) throw Interrupted{};
      throw std::runtime_error("variant " + std::to_string(i + 1) + ": " + run.error);
    }
    if (run.status == sweep::VariantStatus::kOom) {
      in.failed = true;
      in.failure = "out of memory";
    } else {
      in.step_ns = round_to_ns(run.step_time_s);
      if (in.step_ns <= 0) in.failed = true, in.failure = "no step time";
    }
    err << "simrun hpo: variant " << (i + 1) << "/" << order.size() << ": "
        << (in.failed ? in.failure : fmt("%.6f s/step", ns_to_s(in.step_ns))) << "\n";
  }
  std::vector<hpo::TrialInput> out;
  for (const hpo::Assignment& a : trials) {
    std::vector<std::string> sets = base_sets;
    for (const std::string& s : hpo::scenario_overrides(a)) sets.push_back(s);
    out.push_back(cache[sets]);
  }
  return out;
}

// [SECTION] Report -------------------------------------------------------------------------------

std::string rung_label(const hpo::Segment& seg, hpo::SchedulerKind k) {
  const std::string t = "trial " + std::to_string(seg.trial);
  if (k == hpo::SchedulerKind::kFifo) return t;
  if (seg.rung == 0) return t + " r0";
  return t + " r" + std::to_string(seg.rung - 1) + "->r" + std::to_string(seg.rung);
}

nlohmann::json results_json(const hpo::Schedule& s, const std::vector<hpo::Assignment>& knobs,
                            const nlohmann::json& setup) {
  nlohmann::json j = setup;
  j["rungs_iterations"] = s.rungs;
  nlohmann::json trials = nlohmann::json::array();
  for (const hpo::TrialResult& t : s.trials) {
    nlohmann::json k = nlohmann::json::object();
    for (const auto& [key, value] : knobs[static_cast<std::size_t>(t.id)]) k[key] = value;
    nlohmann::json r = {
        {"trial", t.id},
        {"knobs", k},
        {"outcome", hpo::to_string(t.outcome)},
        {"iteration_time_s", ns_to_s(t.step_ns)},
        {"step_time_s", ns_to_s(t.step_ns) / setup["steps_per_iter"].get<double>()}};
    if (t.outcome == hpo::Outcome::kFailed) r["failure"] = t.failure;
    if (t.rung >= 0) {
      r["start_s"] = ns_to_s(t.start_ns);
      r["end_s"] = ns_to_s(t.end_ns);
      r["rung"] = t.rung;
      r["iterations"] = t.iterations;
      r["metric"] = t.metric;
    }
    trials.push_back(r);
  }
  j["trials"] = trials;
  nlohmann::json jobs = nlohmann::json::array();
  for (const hpo::Segment& seg : s.segments)
    jobs.push_back({{"trial", seg.trial},
                    {"rung", seg.rung},
                    {"gpus", seg.gpus},
                    {"start_s", ns_to_s(seg.start_ns)},
                    {"end_s", ns_to_s(seg.end_ns)},
                    {"from_iter", seg.from_iter},
                    {"to_iter", seg.to_iter},
                    {"promotion", seg.promotion}});
  j["jobs"] = jobs;
  j["totals"] = {{"wall_time_s", ns_to_s(s.wall_ns)},
                 {"gpus", s.gpus},
                 {"gpu_busy_s", ns_to_s(s.gpu_busy_ns)},
                 {"gpu_idle_s", ns_to_s(s.gpu_idle_ns)},
                 {"completed", s.completed},
                 {"stopped_early", s.stopped_early},
                 {"stopped_at_rung", s.stopped_at_rung},
                 {"failed", s.failed},
                 {"best_trial", s.best_trial}};
  return j;
}

void print_table(const hpo::Schedule& s, const std::vector<hpo::Assignment>& knobs,
                 const std::string& metric_name, std::ostream& out) {
  out << "trial  iter (s)    start (s)     end (s)  rung  iters  " << metric_name
      << "     outcome        knobs\n";
  for (const hpo::TrialResult& t : s.trials) {
    out << fmt("%5.0f", t.id) << "  " << fmt("%8.4f", ns_to_s(t.step_ns)) << "  ";
    if (t.rung >= 0)
      out << fmt("%10.2f", ns_to_s(t.start_ns)) << "  " << fmt("%10.2f", ns_to_s(t.end_ns)) << "  "
          << fmt("%4.0f", t.rung) << "  " << fmt("%5.0f", static_cast<double>(t.iterations)) << "  "
          << fmt("%-8.4f", t.metric) << "  ";
    else
      out << "         -           -     -      -  -         ";
    out << hpo::to_string(t.outcome);
    const std::string pad(14 - std::string(hpo::to_string(t.outcome)).size(), ' ');
    out << pad << " " << hpo::describe(knobs[static_cast<std::size_t>(t.id)])
        << (t.outcome == hpo::Outcome::kFailed ? " (" + t.failure + ")" : "") << "\n";
  }
  const double wall = ns_to_s(s.wall_ns);
  const double held = static_cast<double>(s.gpus) * wall;
  out << "\nwall time            " << fmt("%.2f s", wall) << fmt(" (%.3f h)", wall / 3600) << "\n";
  out << "GPU time held        " << fmt("%.2f GPU-s", ns_to_s(s.gpu_busy_ns))
      << fmt(" (%.1f %% of ", held > 0 ? 100.0 * ns_to_s(s.gpu_busy_ns) / held : 0.0) << s.gpus
      << " GPUs x wall)\n";
  out << "GPU idle             " << fmt("%.2f GPU-s", ns_to_s(s.gpu_idle_ns)) << "\n";
  out << "trials               " << s.trials.size() << ": " << s.completed << " completed, "
      << s.stopped_early << " stopped early, " << s.failed << " failed";
  if (s.not_run > 0) out << ", " << s.not_run << " not run";
  out << "\n";
  for (std::size_t k = 0; k + 1 < s.rungs.size(); ++k)
    out << "  stopped at rung " << k << " (" << s.rungs[k]
        << " iterations): " << s.stopped_at_rung[k] << "\n";
  if (s.best_trial >= 0) {
    const hpo::TrialResult& b = s.trials[static_cast<std::size_t>(s.best_trial)];
    out << "best trial           " << b.id << ": " << metric_name << " " << fmt("%.4f", b.metric)
        << " after " << b.iterations << " iterations; "
        << hpo::describe(knobs[static_cast<std::size_t>(b.id)]) << "\n";
  }
}

}  // namespace

// [SECTION] Trace --------------------------------------------------------------------------------

prof::Trace hpo_trace(const hpo::Schedule& s, const std::vector<hpo::Assignment>& knobs,
                      int gpus_per_node, const nlohmann::json& metadata) {
  prof::Trace tr;
  tr.world_size = s.gpus;
  tr.metadata = metadata;
  tr.metadata["hpo"] = true;
  for (int g = 0; g < s.gpus; ++g) {
    prof::ProcessInfo p;
    p.pid = g;
    p.gpu = g;
    p.rank = g;
    p.node = g / gpus_per_node;
    p.name = prof::gpu_process_name(g, gpus_per_node);
    p.sort_index = g;
    tr.processes.push_back(p);
    tr.threads.push_back({g, 0, "trials", prof::LaneRole::kCompute, 0});
  }
  const hpo::SchedulerKind kind =
      s.rungs.size() == 1 ? hpo::SchedulerKind::kFifo : hpo::SchedulerKind::kAsha;
  for (const hpo::Segment& seg : s.segments) {
    const hpo::TrialResult& t = s.trials[static_cast<std::size_t>(seg.trial)];
    for (int g : seg.gpus) {
      prof::TraceEvent e;
      e.pid = g;
      e.tid = 0;
      e.ts_ns = seg.start_ns;
      e.dur_ns = seg.end_ns - seg.start_ns;
      e.name = rung_label(seg, kind);
      e.cat = "hpo_trial";
      e.cls = t.outcome == hpo::Outcome::kCompleted ? prof::EventClass::kCompute
                                                    : prof::EventClass::kOther;
      e.args = {{"trial", std::int64_t{seg.trial}},
                {"rung", std::int64_t{seg.rung}},
                {"iterations", std::to_string(seg.from_iter) + "->" + std::to_string(seg.to_iter)},
                {"knobs", hpo::describe(knobs[static_cast<std::size_t>(seg.trial)])},
                {"iteration_time_s", ns_to_s(t.step_ns)},
                {"metric", seg.metric},
                {"outcome", std::string(hpo::to_string(t.outcome))}};
      tr.events.push_back(std::move(e));
    }
  }
  return tr;
}

// [SECTION] Command ------------------------------------------------------------------------------

int hpo_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "simrun hpo: cost a hyper-parameter search on the scenario's cluster: trials drawn from a "
      "search space, each variant's step time simulated, trials placed first-fit and scheduled "
      "FIFO or by ASHA; prints wall time, GPU idle time and the trials stopped early "
      "(docs/hpo.md).\n"
      "Example: simrun hpo scenarios/mlp_1xh200.json --set cluster.gpus_per_node=4 "
      "--space training.global_batch=4096,8192 --space param.lr=1e-4,3e-4,1e-3 --trials 27 "
      "--scheduler asha --max-t 27 -o hpo.json",
      "simrun hpo"};
  std::string scenario_path, profile, curves_path, trace_path, results_path;
  std::string scheduler = "asha", search = "random";
  std::vector<std::string> spaces, overrides;
  int trials = 0;
  std::uint64_t seed = 0;
  double startup_s = 0;
  std::int64_t steps_per_iter = 1;
  hpo::SearchOptions o;
  app.add_option("scenario", scenario_path,
                 "scenario JSON: its cluster is the search's cluster, its job each trial's")
      ->required();
  app.add_option("--space", spaces,
                 "a knob: KEY=V1,V2,... (a scenario dotted path as --set, or param.NAME for a "
                 "hyper-parameter the simulator does not see)")
      ->required();
  // Explicit ranges: CLI11's PositiveNumber prints the largest double (309 digits) as its bound.
  app.add_option("--trials", trials, "number of trials (1 to 1,000,000)")
      ->required()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--search", search, "random (default: seeded) or grid (cycled)")
      ->check(CLI::IsMember({"random", "grid"}));
  app.add_option("--seed", seed, "seed of the random search and of the synthetic curves");
  app.add_option("--gpus-per-trial", o.per_trial.gpus, "GPUs per trial (default 1)");
  app.add_option("--cpus-per-trial", o.per_trial.cpus, "CPU cores per trial (default 1)");
  app.add_option("--scheduler", scheduler,
                 "fifo, asha (default: Li et al. 2020, promotions) or asha-stop (Ray Tune's "
                 "stopping variant)")
      ->check(CLI::IsMember({"fifo", "asha", "asha-stop"}));
  app.add_option("--grace-period", o.asha.grace_period, "ASHA: iterations of rung 0 (default 1)");
  app.add_option("--reduction-factor", o.asha.reduction_factor, "ASHA: eta (default 3)");
  app.add_option("--max-t", o.asha.max_t, "iterations of a completed trial (default 9)");
  app.add_option("--steps-per-iter", steps_per_iter,
                 "training steps in one iteration, the unit of --grace-period and --max-t "
                 "(Ray's training_iteration: e.g. the steps of an epoch; default 1)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000000}));
  app.add_option("--startup-s", startup_s,
                 "seconds each job spends starting (process, checkpoint restore), GPUs held "
                 "(default 0)");
  app.add_option("--curves", curves_path,
                 "scripted metric curves (JSON); default: synthetic, seeded (docs/hpo.md)");
  app.add_option("--set", overrides,
                 "override a scenario value for every trial: dotted.path=VALUE");
  app.add_option("--device-profile", profile, "apply a device profile (simrun calibrate -o)");
  std::string hf_config;
  add_hf_config_option(app, hf_config);
  app.add_option("-o,--output", trace_path, "write the schedule as a trace (one process per GPU)");
  app.add_option("--results", results_path, "write per-trial results and totals as JSON");
  if (const int code = parse_command_line(app, args, "simrun hpo", out, err); code >= 0)
    return code;
  return run_command("simrun hpo", err, [&]() -> int {
    check_output_files({{"-o", trace_path}, {"--results", results_path}});
    std::vector<hpo::Knob> knobs;
    for (const std::string& s : spaces) knobs.push_back(hpo::parse_knob(s));
    hpo::parse_scheduler(scheduler, &o.scheduler);
    o.startup_ns = round_to_ns(startup_s);
    const run::ScenarioLoader loader =
        run::ScenarioLoader::from_file(scenario_path, profile, {}, hf_config);
    const core::Scenario base = loader.load(overrides);
    o.cluster = {base.cluster.nodes, base.cluster.gpus_per_node, base.host.cpu_cores};
    hpo::validate(o);
    // Every input before the first simulation: a bad --curves file fails in milliseconds.
    hpo::ScriptedCurves scripted;
    if (!curves_path.empty())
      scripted = hpo::read_scripted_curves(curves_path, trials, o.asha.max_t);
    const std::vector<hpo::Assignment> assignments = hpo::sample_trials(
        knobs, trials, search == "grid" ? hpo::Sampler::kGrid : hpo::Sampler::kRandom, seed);
    // Each trial's job runs on its own GPUs: the scenario's cluster shrunk to one trial's share.
    std::vector<std::string> trial_sets = overrides;
    const int g = o.per_trial.gpus, gpn = base.cluster.gpus_per_node;
    trial_sets.push_back("cluster.nodes=" + std::to_string(g > gpn ? g / gpn : 1));
    trial_sets.push_back("cluster.gpus_per_node=" + std::to_string(g > gpn ? gpn : g));
    say_on_interrupt("simrun hpo", "stopping the variants' simulations; nothing will be written",
                     "nothing written");
    std::vector<hpo::TrialInput> inputs;
    try {
      inputs = step_times(loader, trial_sets, assignments, err);
    } catch (const Interrupted&) {
      err << "simrun hpo: interrupted; nothing written\n";
      return kExitInterrupted;
    }
    for (hpo::TrialInput& in : inputs) in.step_ns *= steps_per_iter;  // time of one iteration
    const hpo::CurveFn curve = curves_path.empty() ? hpo::synthetic_curves(seed) : scripted.fn();
    const hpo::Schedule s = hpo::simulate_search(inputs, curve, o);

    const std::string curves_label =
        curves_path.empty() ? "synthetic (loss = a + b * r^-c, seeded; not a prediction)"
                            : "scripted (" + curves_path + ")";
    out << "simrun hpo: " << trials << " trials (" << search << ", seed " << seed << ") on "
        << o.cluster.nodes << " node(s) x " << o.cluster.gpus_per_node << " GPUs, "
        << o.cluster.cpus_per_node << " CPU cores per node; " << o.per_trial.gpus << " GPU(s), "
        << o.per_trial.cpus << " CPU(s) per trial\n";
    out << "scheduler " << scheduler;
    if (o.scheduler != hpo::SchedulerKind::kFifo)
      out << ": grace_period " << o.asha.grace_period << ", reduction_factor "
          << o.asha.reduction_factor;
    out << ", max_t " << o.asha.max_t << "; rungs (iterations):";
    for (std::int64_t r : s.rungs) out << " " << r;
    out << "\ncurves: " << curves_label << "\n\n";
    const std::string metric_name =
        curves_path.empty() ? "loss" : (scripted.maximise ? "-metric" : "metric");
    print_table(s, assignments, metric_name, out);

    nlohmann::json setup = {{"scenario", scenario_path},
                            {"scheduler", scheduler},
                            {"grace_period", o.asha.grace_period},
                            {"reduction_factor", o.asha.reduction_factor},
                            {"max_t", o.asha.max_t},
                            {"search", search},
                            {"seed", seed},
                            {"gpus_per_trial", o.per_trial.gpus},
                            {"cpus_per_trial", o.per_trial.cpus},
                            {"startup_s", startup_s},
                            {"steps_per_iter", steps_per_iter},
                            {"curves", curves_label}};
    set_writing(true);
    if (!trace_path.empty()) {
      prof::write_chrome_trace_file(hpo_trace(s, assignments, gpn, setup), trace_path);
      out << "wrote " << trace_path << " (simview " << trace_path << ")\n";
    }
    if (!results_path.empty()) {
      prof::write_file_atomically(results_path, [&](std::ostream& os) {
        os << results_json(s, assignments, setup).dump(2) << "\n";
      });
      out << "wrote " << results_path << "\n";
    }
    set_writing(false);
    return kExitOk;
  });
}

}  // namespace csim::app
