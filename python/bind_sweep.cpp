// sweep and tune (docs/python.md): sweep/'s variant space, runner and results file, tune's
// layout search, each run off the GIL and stopped by Ctrl-C with what finished kept.
#include <exception>
#include <mutex>

#include <pybind11/stl.h>

#include "core/error.hpp"
#include "profiler/atomic_file.hpp"
#include "python/bindings.hpp"
#include "python/py_scenario.hpp"
#include "run/scenario_loader.hpp"
#include "sweep/knob_check.hpp"
#include "sweep/results_io.hpp"
#include "sweep/sweep_file.hpp"
#include "sweep/sweep_runner.hpp"
#include "sweep/tune.hpp"
#include "sweep/variant_space.hpp"

namespace csim::py {
namespace {

run::Evaluation evaluation_of(bool op_level) {
  return op_level ? run::Evaluation::kOpLevel : run::Evaluation::kBlock;
}

// One row as simrun sweep's JSON results file has it (sweep/results_io.hpp), the knobs as
// columns of their own.
pb::dict row_dict(const std::vector<std::string>& keys, const sweep::VariantResult& r) {
  pb::dict d;
  d["index"] = r.index;
  for (std::size_t k = 0; k < keys.size(); ++k) d[pb::str(keys[k])] = r.values[k];
  d["status"] = sweep::to_string(r.status);
  d["step_time_s"] = r.step_time_s;
  d["samples_per_s"] = r.samples_per_s;
  d["mfu"] = r.mfu;
  d["gpus"] = r.gpus;
  d["peak_gib"] = r.peak_gib;
  d["usable_gib"] = r.usable_gib;
  d["error"] = r.error;
  return d;
}

// (rows, complete): rows sorted as simrun sweep sorts them. With `output`, simrun sweep -o's
// results file, resumed as simrun sweep resumes it (sweep::SweepFile: an earlier run's rows kept,
// their variants skipped, checkpoints while it runs) unless `fresh`; the rows returned are then
// the file's, kept and new. `on_row`, when not None, is called with each new row's dict as it
// finishes (on a worker thread, holding the GIL); returning False stops the sweep as Ctrl-C does.
pb::tuple sweep_scenario(const run::ScenarioLoader& loader,
                         const std::vector<std::pair<std::string, std::vector<std::string>>>& grid,
                         int jobs, bool op_level, const std::string& sort, std::size_t random_n,
                         std::uint64_t seed, std::size_t max_variants, const std::string& output,
                         bool fresh, const pb::object& on_row) {
  if (!output.empty()) prof::check_output_file("output", output);
  sweep::SortKey key;
  if (!sweep::parse_sort_key(sort, &key))
    throw InputError("", "sort", "unknown sort key '" + sort + "'",
                     "throughput, step_time, mfu, memory or index");
  if (grid.empty()) throw InputError("", "grid", "no knob to sweep", "grid={\"KEY\": [V1, V2]}");
  std::vector<sweep::Knob> knobs;
  for (const auto& [k, values] : grid) {
    if (values.empty())
      throw InputError("", "grid[\"" + k + "\"]", "no values", "a list of at least one value");
    knobs.push_back({k, values});
  }
  const nlohmann::json& doc = loader.document();
  sweep::check_knobs(doc, loader.name(), loader.overrides(), knobs);
  const std::vector<sweep::Variant> variants = random_n > 0
                                                   ? sweep::random_variants(knobs, random_n, seed)
                                                   : sweep::grid_variants(knobs, max_variants);
  sweep::ResultsHeader header;
  header.scenario = loader.name();
  header.base = sweep::base_fingerprint(loader.overrides());
  for (const sweep::Knob& k : knobs) header.keys.push_back(k.key);
  header.variants_total = variants.size();
  sweep::SweepFile file(output, header, knobs, variants, key, fresh);

  std::atomic<bool> cancel{false};
  sweep::SweepRunOptions opt;
  opt.threads = std::max(jobs, 1);
  opt.evaluation = evaluation_of(op_level);
  opt.cancel = &cancel;
  opt.on_checkpoint = [&file](const std::vector<sweep::VariantResult>& rows) {
    file.write(file.merged(rows), false);
  };
  std::exception_ptr callback_error;
  std::mutex callback_mutex;
  if (!on_row.is_none()) {
    opt.on_row = [&](const sweep::VariantResult& r) {
      pb::gil_scoped_acquire gil;
      std::lock_guard<std::mutex> lock(callback_mutex);
      if (callback_error) return;
      try {
        const pb::object go_on = on_row(row_dict(file.header().keys, r));
        if (!go_on.is_none() && !go_on.cast<bool>()) cancel.store(true);
      } catch (pb::error_already_set& e) {
        callback_error = std::current_exception();
        cancel.store(true);
      }
    };
  }
  sweep::SweepRunOutcome outcome;
  std::vector<sweep::VariantResult> rows;
  run_interruptible(cancel, [&] {
    outcome =
        sweep::run_variants(doc, loader.name(), loader.overrides(), knobs, file.pending(), opt);
    rows = file.merged(outcome.rows);
    file.write(rows, outcome.complete);
  });
  if (callback_error) std::rethrow_exception(callback_error);
  pb::list out;
  for (const sweep::VariantResult& r : rows) out.append(row_dict(header.keys, r));
  return pb::make_tuple(out, outcome.complete);
}

// simrun tune -o's report (sweep::tune_report_json) with "complete".
pb::object tune_scenario(const run::ScenarioLoader& loader, int gpus, int top, int jobs,
                         bool op_level) {
  std::atomic<bool> cancel{false};
  sweep::TuneOptions opt;
  opt.gpus = gpus;
  opt.threads = std::max(jobs, 1);
  opt.evaluation = evaluation_of(op_level);
  opt.cancel = &cancel;
  nlohmann::json report;
  run_interruptible(cancel, [&] {
    const sweep::TuneResult r =
        sweep::tune(loader.document(), loader.name(), loader.overrides(), opt);
    report = sweep::tune_report_json(r, std::max(top, 1));
    report["complete"] = r.complete;
  });
  return to_python(report);
}

}  // namespace

void bind_sweep(pb::module_& m) {
  m.def(
      "_sweep",
      [](const PyScenario& sc,
         const std::vector<std::pair<std::string, std::vector<std::string>>>& grid, int jobs,
         bool op_level, const std::string& sort, std::size_t random_n, std::uint64_t seed,
         std::size_t max_variants, const std::string& output, bool fresh,
         const pb::object& on_row) {
        return sweep_scenario(*sc.loader, grid, jobs, op_level, sort, random_n, seed, max_variants,
                              output, fresh, on_row);
      },
      pb::arg("scenario"), pb::arg("grid"), pb::arg("jobs"), pb::arg("op_level"), pb::arg("sort"),
      pb::arg("random"), pb::arg("seed"), pb::arg("max_variants"), pb::arg("output"),
      pb::arg("fresh"), pb::arg("on_row"));
  m.def(
      "_tune",
      [](const PyScenario& sc, int gpus, int top, int jobs, bool op_level) {
        return tune_scenario(*sc.loader, gpus, top, jobs, op_level);
      },
      pb::arg("scenario"), pb::arg("gpus"), pb::arg("top"), pb::arg("jobs"), pb::arg("op_level"));
}

}  // namespace csim::py
