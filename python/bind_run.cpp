// load and simulate (docs/python.md): a scenario through run/'s ScenarioLoader, one run through
// run::run() with the GIL released, its summary as backend::summarize_run or prof::summarize
// gives it to simrun --summary, its trace written on request.
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

#include <pybind11/stl.h>

#include "backends/common/module_loader.hpp"
#include "backends/common/run_summary.hpp"
#include "backends/common/trace_builder.hpp"
#include "core/error.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/per_rank_traces.hpp"
#include "profiler/summary.hpp"
#include "python/bindings.hpp"
#include "python/py_scenario.hpp"
#include "run/rank_main.hpp"
#include "run/run.hpp"
#include "run/scenario_loader.hpp"

namespace csim::py {
namespace {

// One run: what run::run() returned, its summary, whether Ctrl-C cut it short.
struct PyRun {
  std::shared_ptr<const core::Scenario> scenario;
  std::shared_ptr<run::RunResult> run;
  prof::Summary summary;
  bool interrupted = false;

  // Held while the trace is built or written: write_trace runs without the GIL, so two threads
  // may call it on one result.
  std::shared_ptr<std::mutex> trace_mutex = std::make_shared<std::mutex>();

  // The run's trace: the one built during the run, else built now from its timings (the same
  // bytes: backend::build_trace is what the simulator's trace is).
  const prof::Trace& trace() {
    if (run->trace.events.empty() && !run->trace_formatted)
      run->trace = backend::build_trace(*scenario, run->program, run->result, run->memory);
    return run->trace;
  }
  void write_trace(const std::string& path) {
    prof::check_output_file("trace", path);
    std::lock_guard<std::mutex> lock(*trace_mutex);
    if (run->trace_formatted) {
      run::write_trace_file(*run, *scenario, path);
      return;
    }
    prof::write_chrome_trace_file(trace(), path);
  }
  void write_per_rank(const std::string& dir) {
    prof::check_output_dir("per_rank", dir);
    std::lock_guard<std::mutex> lock(*trace_mutex);
    if (run->trace_formatted) {  // the formatted trace holds no events to split
      run->trace_formatted = false;
      run->formatted_trace = {};
    }
    (void)prof::write_per_rank_traces(trace(), dir, prof::PerRankMirrors::kEveryRank);
  }
};

run::Backend backend_of(const std::string& name) {
  run::Backend b;
  if (!run::parse_backend(name, &b))
    throw InputError("", "backend", "unknown backend '" + name + "'", "sim, standin or cuda");
  return b;
}

// Launch modes of a real run inside an interpreter: threads, and processes, whose ranks are
// started by exec of csim-rank (backends/real/process_launcher.cpp: never a fork of the
// interpreter); mpi needs mpirun. The rank executable is looked for here so that a missing one is
// this call's InputError, naming its argument.
run::Launch launch_of(const std::string& name) {
  run::Launch l;
  if (!run::parse_launch(name, &l))
    throw InputError("", "launch", "unknown launch mode '" + name + "'", "threads or processes");
  if (l == run::Launch::kMpi)
    throw InputError("", "launch",
                     "launch mode 'mpi' is not offered inside Python: it needs mpirun",
                     "launch='processes', or mpirun -np N simrun SCENARIO --launch mpi");
  if (l == run::Launch::kProcesses) {
    std::string why;
    if (run::find_rank_executable(&why).empty())
      throw InputError("", "launch", "processes: " + why,
                       "build it (cmake --build --preset release --target csim-rank), set " +
                           std::string(run::kRankExecutableEnv) + "=PATH, or launch='threads'");
  }
  return l;
}

PyScenario load(const std::optional<std::string>& path, const pb::object& document,
                const std::string& name, const std::vector<std::string>& sets,
                const std::string& hf_config, const std::string& device_profile) {
  PyScenario s;
  if (path) {
    s.loader = std::make_shared<run::ScenarioLoader>(
        run::ScenarioLoader::from_file(*path, device_profile, sets, hf_config));
  } else {
    if (!hf_config.empty())
      throw InputError(name, "", "hf_config needs a scenario file",
                       "write the dict to a file, or set its model keys directly");
    s.loader = std::make_shared<run::ScenarioLoader>(
        run::ScenarioLoader::from_document(from_python(document), name, device_profile, sets));
  }
  s.scenario = std::make_shared<const core::Scenario>(s.loader->load());
  return s;
}

PyRun simulate(const PyScenario& sc, const std::string& backend, const std::string& launch,
               bool build_trace) {
  PyRun r;
  r.scenario = sc.scenario;
  run::RunRequest rq;
  rq.scenario = r.scenario.get();
  rq.backend = backend_of(backend);
  rq.launch = launch_of(launch);
  // simrun's rule: the simulator's summary needs no trace; a real run's is read from its trace.
  rq.trace = build_trace || rq.backend != run::Backend::kSim;
  std::atomic<bool> cancel{false};
  rq.control.cancel = &cancel;
  r.interrupted = run_interruptible(cancel, [&] {
    r.run = std::make_shared<run::RunResult>(run::run(rq));
    r.summary = rq.trace ? prof::summarize(r.run->trace)
                         : backend::summarize_run(*r.scenario, r.run->program, r.run->result,
                                                  r.run->memory);
  });
  return r;
}

}  // namespace

void bind_run(pb::module_& m) {
  pb::class_<PyScenario>(m, "Scenario")
      .def_property_readonly("name", [](const PyScenario& s) { return s.loader->name(); })
      .def_property_readonly("document",
                             [](const PyScenario& s) { return to_python(s.loader->document()); })
      .def_property_readonly("overrides", [](const PyScenario& s) { return s.loader->overrides(); })
      .def_property_readonly("gpus",
                             [](const PyScenario& s) { return s.scenario->cluster.world_gpus(); });

  pb::class_<PyRun>(m, "_Run")
      .def_property_readonly(
          "summary", [](const PyRun& r) { return to_python(prof::summary_to_json(r.summary)); })
      .def_property_readonly("complete", [](const PyRun& r) { return r.run->result.complete; })
      .def_property_readonly("interrupted", [](const PyRun& r) { return r.interrupted; })
      .def_property_readonly("failure", [](const PyRun& r) { return r.run->failure; })
      .def_property_readonly("warnings", [](const PyRun& r) { return r.run->warnings; })
      .def_property_readonly("notes", [](const PyRun& r) { return r.run->notes; })
      .def_property_readonly("steps", [](const PyRun& r) { return r.run->program.steps; })
      .def_property_readonly(
          "completed_steps",
          [](const PyRun& r) { return backend::completed_steps(r.run->program, r.run->result); })
      .def("write_trace", &PyRun::write_trace, pb::arg("path"),
           pb::call_guard<pb::gil_scoped_release>())
      .def("write_per_rank", &PyRun::write_per_rank, pb::arg("dir"),
           pb::call_guard<pb::gil_scoped_release>());

  m.def("_load", &load, pb::arg("path"), pb::arg("document"), pb::arg("name"), pb::arg("sets"),
        pb::arg("hf_config"), pb::arg("device_profile"));
  m.def("_simulate", &simulate, pb::arg("scenario"), pb::arg("backend"), pb::arg("launch"),
        pb::arg("trace"));
  m.def("cuda_status", &run::cuda_status_line, "What the CUDA backend found on this machine.");
  // Diagnostics of the module lookup (docs/python.md, "Where the module looks"): the folder found
  // by dladdr, the first place looked in, and the rank executable the lookup finds.
  m.def("_module_search_dir", &backend::module_anchor_dir);
  m.def("_rank_executable", [] {
    std::string why;
    const std::string path = run::find_rank_executable(&why);
    return path.empty() ? pb::object(pb::none()) : pb::object(pb::str(path));
  });
}

}  // namespace csim::py
