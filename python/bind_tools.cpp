// collective, diff and replay (docs/python.md): run/'s collective size sweep (simrun collective),
// profiler/'s trace diff (tracediff) and replay/'s pipeline (simrun replay), as plain values.
#include <pybind11/stl.h>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/run_metrics_file.hpp"
#include "profiler/trace_diff.hpp"
#include "python/bindings.hpp"
#include "replay/replay_run.hpp"
#include "run/collective_bench.hpp"

namespace csim::py {
namespace {

pb::list collective(const std::string& cluster, const std::string& op, const std::string& min_size,
                    const std::string& max_size, double factor, int gpus, const std::string& dtype,
                    const std::string& algo, const std::string& proto,
                    const std::vector<std::string>& sets) {
  run::CollectiveBenchRequest rq;
  rq.cluster_path = cluster;
  rq.overrides = sets;
  rq.kind = run::parse_collective_op(op, "op");
  rq.algo = run::parse_collective_algo(algo, "algo");
  rq.proto = run::parse_collective_proto(proto, "proto");
  rq.gpus = gpus;
  rq.dtype = dtype;
  rq.min_bytes = run::parse_collective_size(min_size, "sizes");
  rq.max_bytes = run::parse_collective_size(max_size, "sizes");
  rq.factor = factor;
  run::CollectiveBenchResult r;
  {
    pb::gil_scoped_release release;
    r = run::run_collective_bench(rq);
  }
  pb::list rows;
  for (const run::CollectiveBenchRow& row : r.rows) {
    pb::dict d;
    d["size_bytes"] = row.size_bytes;
    d["count"] = row.count;
    d["time_s"] = static_cast<double>(row.time_ns) * 1e-9;
    d["algbw_gb_s"] = row.algbw_gb_s;
    d["busbw_gb_s"] = row.busbw_gb_s;
    d["algo"] = core::to_string(row.algo);
    d["proto"] = core::to_string(row.proto);
    d["ranks"] = r.ranks;
    rows.append(d);
  }
  return rows;
}

// simrun replay's figures: per step measured vs replayed, per stream busy time.
pb::dict replay_traces(const std::vector<std::string>& inputs, const std::vector<std::string>& sets,
                       const std::string& trace) {
  replay::ReplayRequest rq;
  rq.inputs = inputs;
  rq.sets = sets;
  rq.trace = !trace.empty();
  if (!trace.empty()) prof::check_output_file("trace", trace);
  std::atomic<bool> cancel{false};
  replay::ReplayOutcome o;
  run_interruptible(cancel, [&] {
    o = replay::replay(rq);
    if (!trace.empty()) run::write_trace_file(o.run, o.scenario, trace);
  });
  pb::list steps, streams;
  for (const replay::StepResult& s : o.steps)
    steps.append(pb::dict(pb::arg("gpu") = s.gpu, pb::arg("name") = s.name,
                          pb::arg("measured_s") = static_cast<double>(s.measured_ns) * 1e-9,
                          pb::arg("replayed_s") = static_cast<double>(s.replayed_ns) * 1e-9));
  for (const replay::StreamResult& s : o.streams)
    streams.append(
        pb::dict(pb::arg("gpu") = s.gpu, pb::arg("name") = s.name,
                 pb::arg("measured_busy_s") = static_cast<double>(s.measured_busy_ns) * 1e-9,
                 pb::arg("replayed_busy_s") = static_cast<double>(s.replayed_busy_ns) * 1e-9));
  pb::dict d;
  d["steps"] = steps;
  d["streams"] = streams;
  d["mean_step_error"] = replay::mean_step_error(o.steps);
  d["source_gpu"] = o.source_gpu;
  d["target_gpu"] = o.target_gpu;
  d["complete"] = o.run.result.complete;
  return d;
}

// tracediff's comparison (docs/tracediff.md): each side one or more traces or summaries, medians
// per side; diff_to_json's report with "regressed".
pb::object diff(const std::vector<std::string>& base, const std::vector<std::string>& next,
                double tolerance, const std::string& tolerances_file) {
  if (base.empty() || next.empty())
    throw InputError("", "", "diff needs a file on each side", "diff(base, new)");
  if (tolerance < 0)
    throw InputError("", "tolerance", "a negative tolerance", "a fraction: 0.02 is 2 %");
  nlohmann::json report;
  {
    pb::gil_scoped_release release;
    prof::Tolerances tol;
    tol.default_rel = tolerance;
    if (!tolerances_file.empty())
      tol.rules = prof::parse_tolerance_rules(
          core::read_text_file(tolerances_file, "tolerance file", "tracediff --help: the format"),
          tolerances_file);
    std::vector<prof::RunMetrics> b, n;
    for (const std::string& p : base) b.push_back(prof::load_run_metrics(p));
    for (const std::string& p : next) n.push_back(prof::load_run_metrics(p));
    const prof::DiffResult d = prof::diff_runs(b, n, tol);
    report = prof::diff_to_json(d);
    report["regressed"] = d.regressed();
  }
  return to_python(report);
}

}  // namespace

void bind_tools(pb::module_& m) {
  m.def("_collective", &collective, pb::arg("cluster"), pb::arg("op"), pb::arg("min_size"),
        pb::arg("max_size"), pb::arg("factor"), pb::arg("gpus"), pb::arg("dtype"), pb::arg("algo"),
        pb::arg("proto"), pb::arg("sets"));
  m.def("_diff", &diff, pb::arg("base"), pb::arg("new"), pb::arg("tolerance"),
        pb::arg("tolerances"));
  m.def("_replay", &replay_traces, pb::arg("inputs"), pb::arg("sets"), pb::arg("trace"));
}

}  // namespace csim::py
