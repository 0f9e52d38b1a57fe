// simrun calibrate (docs/calibration.md): wiring only; the series, fits and profile live in
// calibration/.
#include "tools/calibrate.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>

#include "backends/real/real_executor.hpp"
#include "backends/real/standin_runtime.hpp"
#include "backends/sim/sim_executor.hpp"
#include "calibration/device_profile.hpp"
#include "core/error.hpp"
#include "profiler/atomic_file.hpp"
#include "run/real_run.hpp"
#include "run/scenario_loader.hpp"
#include "tools/signals.hpp"
#include "tools/simrun_app.hpp"

namespace csim::app {

calibration::MicroRunner make_micro_runner(const core::Scenario& node, const std::string& backend,
                                           const core::RunControl& control) {
  return [node, backend, control](const calibration::MicroProgram& mp) {
    calibration::MicroRun r;
    const run::Backend b = backend_of(backend);
    double time_scale = 1.0;
    const bool emulate_gil = false;  // one thread, no Python time: nothing to serialise
    if (backend == "standin") {
      // The stand-in sleeps each op's simulated duration x time_scale: scale the timed op to
      // kStandinOpNs of real time; measure_point divides the scale back out.
      sim::SimExecutor sim(node);
      const std::vector<TimeNs> busy = real::standin_busy_ns(mp.program, sim.run(mp.program, {}));
      TimeNs op_ns = 0;
      for (core::OpId id : mp.timed.front())
        op_ns = std::max(op_ns, busy[static_cast<std::size_t>(id)]);
      r.time_scale =
          static_cast<double>(kStandinOpNs) / static_cast<double>(std::max<TimeNs>(1, op_ns));
      time_scale = r.time_scale;
      r.fastest = true;  // a stand-in op lasts its scaled duration plus a late wake-up, never less
    }
    std::unique_ptr<real::DeviceRuntime> rt =
        run::make_device_runtime(node, mp.program, b, time_scale);
    real::RealExecutor exec(*rt, real::RealOptions{emulate_gil});
    r.result = exec.run(mp.program, control);
    r.runtime = rt->info().metadata;
    r.runtime.erase("time_scale");  // the stand-in's: one per micro-Program, divided out
    return r;
  };
}

int calibrate_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "simrun calibrate: measure the scenario's GPU (and, with 2 or more GPUs per node, its "
      "peer copies and collectives) with micro-Programs run like a real run, fit the cost "
      "model's constants and write a device profile (docs/calibration.md).\n"
      "Example: simrun calibrate scenarios/mlp_1xh200.json -o h200.json; then "
      "simrun SCENARIO --device-profile h200.json",
      "simrun calibrate"};
  std::string scenario_path, output, backend = "cuda";
  std::vector<std::string> overrides;
  bool quick = false;
  app.add_option("scenario", scenario_path,
                 "scenario JSON file naming the GPU and node (docs/scenario.md)")
      ->required();
  app.add_option("--backend", backend,
                 "cuda (default: the GPUs here) or standin (CPU threads; recovers the scenario's "
                 "own constants: a test of the pipeline, not a measurement)")
      ->check(CLI::IsMember({"cuda", "standin"}));
  app.add_option("-o,--output", output, "write the device profile (JSON) to this file");
  app.add_flag("--quick", quick, "fewer sizes and repetitions");
  app.add_option("--set", overrides, "override a scenario value: dotted.path=VALUE");
  if (const int code = parse_command_line(app, args, "simrun calibrate", out, err); code >= 0)
    return code;
  return run_command("simrun calibrate", err, [&]() -> int {
    check_output_files({{"-o", output}});
    const core::Scenario node =
        calibration::calibration_node(run::load_scenario(scenario_path, {}, overrides));
    // CUDA 13 builds for compute capability 7.5 and newer (as simrun --backend cuda).
    const int cc = node.cluster.gpu.compute_capability;
    if (backend == "cuda" && cc > 0 && cc < 75)
      throw BackendUnavailable("the scenario's GPU " + node.cluster.gpu.name +
                               " cannot run with CUDA 13 (compute capability below 7.5)");
    core::RunControl control;
    control.cancel = cancel_flag();
    say_on_interrupt("simrun calibrate", "stopping the micro-benchmarks; nothing will be written",
                     "nothing written");
    calibration::Options opts;
    opts.quick = quick;
    opts.progress = [&err](const std::string& line) {
      err << "simrun calibrate: " << line << "\n";
    };
    const calibration::Calibration c =
        calibration::run_calibration(node, make_micro_runner(node, backend, control), opts);
    if (!c.complete) {
      err << "simrun calibrate: interrupted; nothing written\n";
      return kExitInterrupted;
    }
    const calibration::Fits f = calibration::fit_series(node, c.series);
    calibration::print_table(node, c, f, out);
    if (!output.empty()) {
      const calibration::ProfileContext ctx{scenario_path, calibration::utc_now_iso8601(), quick};
      const nlohmann::json doc = calibration::profile_json(node, c, f, ctx);
      set_writing(true);
      prof::write_file_atomically(output, [&](std::ostream& os) { os << doc.dump(2) << "\n"; });
      set_writing(false);
      out << "wrote " << output << " (apply with: simrun SCENARIO --device-profile " << output
          << ")\n";
    }
    return kExitOk;
  });
}

}  // namespace csim::app
