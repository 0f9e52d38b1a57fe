// simrun compare (docs/real-execution.md, "Compare").
#include "tools/compare.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "core/error.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "run/run.hpp"
#include "run/scenario_loader.hpp"
#include "tools/signals.hpp"
#include "tools/simrun_app.hpp"

namespace csim::app {

const char* to_string(OpClass c) {
  switch (c) {
    case OpClass::kGemm:
      return "gemm";
    case OpClass::kElementwise:
      return "elementwise";
    case OpClass::kCopy:
      return "copy";
    case OpClass::kCollective:
      return "collective";
    case OpClass::kHost:
      return "host";
    case OpClass::kNone:
      break;
  }
  return "none";
}

OpClass op_class(const core::Op& op) {
  switch (op.kind) {
    case core::OpKind::kCompute:
      return op.compute_kind == core::ComputeKind::kElementwise ? OpClass::kElementwise
                                                                : OpClass::kGemm;
    case core::OpKind::kCopy:
      return OpClass::kCopy;
    case core::OpKind::kCollective:
      return OpClass::kCollective;
    case core::OpKind::kHostWork:
      return OpClass::kHost;
    default:
      return OpClass::kNone;  // markers, alloc, free: no duration to compare
  }
}

namespace {

double duration_s(const core::OpTiming& t) {
  return t.end_ns < 0 || t.start_ns < 0 ? 0.0 : static_cast<double>(t.end_ns - t.start_ns) * 1e-9;
}

double span_s(const std::vector<core::OpTiming>& ts) {
  TimeNs first = -1, last = -1;
  for (const core::OpTiming& t : ts) {
    if (t.end_ns < 0) continue;
    if (first < 0 || t.start_ns < first) first = t.start_ns;
    last = std::max(last, t.end_ns);
  }
  return first < 0 ? 0.0 : static_cast<double>(last - first) * 1e-9;
}

std::string ms(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", s * 1e3);
  return b;
}

std::string ratio(double real, double sim) {
  if (sim <= 0) return real > 0 ? "inf" : "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", real / sim);
  return b;
}

}  // namespace

Comparison compare_runs(const core::Program& p, const core::ExecutionResult& sim,
                        const core::ExecutionResult& real, int largest) {
  CSIM_ASSERT_MSG(sim.timings.size() == p.ops.size() && real.timings.size() == p.ops.size(),
                  "both runs must be of this Program");
  Comparison c;
  c.real_backend = real.backend;
  c.real_measured = real.measured;
  c.by_gpu.assign(static_cast<std::size_t>(p.world_gpus), std::vector<ClassTimes>(kNumOpClasses));
  std::vector<Comparison::Largest> all;
  for (const core::Op& op : p.ops) {
    const OpClass k = op_class(op);
    if (k == OpClass::kNone) continue;
    const double s = duration_s(sim.timings[op.id]), r = duration_s(real.timings[op.id]);
    ClassTimes& ct = c.by_gpu[static_cast<std::size_t>(op.gpu)][static_cast<int>(k)];
    ct.sim_s += s;
    ct.real_s += r;
    ++ct.ops;
    all.push_back({op.id, s, r});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.sim_s > b.sim_s; });
  if (static_cast<int>(all.size()) > largest) all.resize(static_cast<std::size_t>(largest));
  c.largest = std::move(all);
  c.sim_span_s = span_s(sim.timings);
  c.real_span_s = span_s(real.timings);
  return c;
}

void print_comparison(const core::Program& p, const Comparison& c, std::ostream& out) {
  out << "simulated vs " << c.real_backend
      << (c.real_measured ? " (measured on GPUs)" : " (CPU stand-in: not a measurement)")
      << "; ratio = real / simulated\n";
  if (!c.note.empty()) out << c.note << "\n";
  out << "whole run: sim " << ms(c.sim_span_s) << " ms, real " << ms(c.real_span_s) << " ms ("
      << ratio(c.real_span_s, c.sim_span_s) << ")\n\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-5s %-12s %6s %12s %12s %8s\n", "GPU", "class", "ops",
                "sim_ms", "real_ms", "ratio");
  out << line;
  for (std::size_t g = 0; g < c.by_gpu.size(); ++g) {
    for (int k = 0; k < kNumOpClasses; ++k) {
      const ClassTimes& ct = c.by_gpu[g][k];
      if (ct.ops == 0) continue;
      std::snprintf(line, sizeof line, "%-5zu %-12s %6d %12s %12s %8s\n", g,
                    to_string(static_cast<OpClass>(k)), ct.ops, ms(ct.sim_s).c_str(),
                    ms(ct.real_s).c_str(), ratio(ct.real_s, ct.sim_s).c_str());
      out << line;
    }
  }
  out << "\nlargest ops (by simulated time):\n";
  std::snprintf(line, sizeof line, "%-5s %-40s %12s %12s %8s\n", "GPU", "op", "sim_ms", "real_ms",
                "ratio");
  out << line;
  for (const auto& l : c.largest) {
    const core::Op& op = p.ops[l.op];
    std::snprintf(line, sizeof line, "%-5d %-40.40s %12s %12s %8s\n", op.gpu, p.name_of(op).c_str(),
                  ms(l.sim_s).c_str(), ms(l.real_s).c_str(), ratio(l.real_s, l.sim_s).c_str());
    out << line;
  }
}

int compare_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "simrun compare: run one scenario simulated and for real (the same Program), print simulated "
      "vs real time per GPU and op class and for the largest ops, and write both traces.\n"
      "Example: simrun compare scenarios/single_gpu_linear.json --backend standin -o run",
      "simrun compare"};
  std::string scenario_path, prefix, device_profile;
  std::vector<std::string> overrides;
  std::string backend = "cuda", launch = "threads";
  double time_scale = 1.0;
  int largest = 10;
  app.add_option("scenario", scenario_path, "scenario JSON file (docs/scenario.md)")->required();
  app.add_option("--backend", backend, "real backend: cuda (default) or standin")
      ->check(CLI::IsMember({"cuda", "standin"}))
      ->default_val("cuda");
  app.add_option("--launch", launch, "launch mode of the real run")
      ->check(CLI::IsMember({"threads", "processes", "mpi"}));
  app.add_option("--time-scale", time_scale, "standin: simulated durations x this")
      ->check(CLI::Range(1e-3, 1e3));
  app.add_option("--set", overrides, "override a scenario value: dotted.path=VALUE");
  app.add_option("--device-profile", device_profile,
                 "apply a device profile's overrides (simrun calibrate -o FILE) before the --set "
                 "ones");
  std::string hf_config;
  add_hf_config_option(app, hf_config);
  app.add_option("-o,--output", prefix, "write PREFIX.sim.json and PREFIX.<backend>.json");
  app.add_option("--largest", largest, "how many of the largest ops to list")
      ->check(CLI::Range(0, 10000));
  if (const int code = parse_command_line(app, args, "simrun compare", out, err); code >= 0)
    return code;
  return run_command("simrun compare", err, [&]() -> int {
    if (!prefix.empty())
      check_output_files({{"-o", prefix + ".sim.json"}, {"-o", prefix + "." + backend + ".json"}});
    core::Scenario scenario =
        run::ScenarioLoader::from_file(scenario_path, device_profile, overrides, hf_config).load();
    // One Program for both runs: real execution needs every rank, so the simulation does too.
    scenario.simulation.symmetry = false;
    run::RunRequest rq;
    rq.scenario = &scenario;
    rq.backend = backend_of(backend);
    rq.launch = launch_of(launch);
    rq.time_scale = time_scale;
    rq.mpi = mpi_support();
    rq.control.cancel = cancel_flag();
    say_on_interrupt("simrun compare", "stopping both runs; nothing will be written",
                     "nothing written");
    rq.trace = !prefix.empty();
    const run::RunResult real = run::run(rq);
    rq.backend = run::Backend::kSim;
    const run::RunResult sim = run::run(rq);
    if (!real.result.complete || !sim.result.complete) {
      err << "simrun compare: interrupted; nothing written\n";
      return kExitInterrupted;
    }
    Comparison c = compare_runs(sim.program, sim.result, real.result, largest);
    if (backend == "standin") {
      char note[200];
      std::snprintf(note, sizeof note,
                    "stand-in stream ops last their simulated time x %g plus the CPU's sleep and "
                    "wake-up latency (tens of us per op); host time is real",
                    time_scale);
      c.note = note;
    }
    print_comparison(sim.program, c, out);
    if (!prefix.empty()) {
      set_writing(true);
      prof::write_chrome_trace_file(sim.trace, prefix + ".sim.json");
      prof::write_chrome_trace_file(real.trace, prefix + "." + real.result.backend + ".json");
      set_writing(false);
      out << "\nwrote " << prefix << ".sim.json and " << prefix << "." << real.result.backend
          << ".json (tracediff compares them)\n";
    }
    return kExitOk;
  });
}

}  // namespace csim::app
