// simrun replay's pipeline (docs/replay.md).
#include "replay/replay_run.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "replay/collective_recost.hpp"
#include "replay/kineto_tokenizer.hpp"
#include "replay/trace_sorter.hpp"
#include "run/scenario_loader.hpp"

namespace csim::replay {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

double scale_value(const std::string& key, const std::string& v) {
  std::size_t used = 0;
  double d = -1;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(d >= 0) || !std::isfinite(d))
    throw InputError("(command line)", "--set " + key, "'" + v + "' is not a factor >= 0",
                     "e.g. --set " + key + "=0.5 halves that time");
  return d;
}

int count_value(const std::string& key, const std::string& v, int hi, const std::string& hint) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || n < 1 || n > hi)
    throw InputError("(command line)", "--set " + key,
                     "'" + v + "' is not a whole number from 1 to " + std::to_string(hi), hint);
  return static_cast<int>(n);
}

// Splits --set into the replay.* knobs and the scenario's overrides.
std::vector<std::string> split_sets(const std::vector<std::string>& sets, ReplayKnobs* k) {
  std::vector<std::string> rest;
  for (const std::string& s : sets) {
    if (s.rfind("replay.", 0) != 0) {
      rest.push_back(s);
      continue;
    }
    const std::size_t eq = s.find('=');
    const std::string key = s.substr(0, eq), v = eq == std::string::npos ? "" : s.substr(eq + 1);
    if (key == "replay.source_gpu") {
      k->source_gpu = v;
    } else if (key == "replay.python_scale") {
      k->python_scale = scale_value(key, v);
    } else if (key == "replay.dispatch_scale") {
      k->dispatch_scale = scale_value(key, v);
    } else if (key == "replay.hold_unexplained") {
      if (v != "true" && v != "false")
        throw InputError("(command line)", "--set " + key, "'" + v + "' is not true or false",
                         "false lets GPU ops held back for no reason the trace shows start early");
      k->hold_unexplained = v == "true";
    } else if (key == "replay.dp_scale") {
      k->dp_scale = count_value(key, v, 1024,
                                "e.g. --set replay.dp_scale=2 runs the same per-rank work on twice "
                                "the data-parallel ranks");
    } else if (key == "replay.source_gpus_per_node") {
      k->source_gpus_per_node = count_value(
          key, v, 16, "the traced job's GPUs per node (as cluster.gpus_per_node), e.g. 8");
    } else {
      throw InputError("(command line)", "--set " + key, "unknown replay key",
                       "replay.source_gpu, replay.python_scale, replay.dispatch_scale, "
                       "replay.hold_unexplained, replay.dp_scale or replay.source_gpus_per_node");
    }
  }
  return rest;
}

// The job's cluster as traced and as the --set keys ask, and its collectives re-costed between
// the two (docs/replay.md, "Collectives on another cluster", "Data-parallel scale-out").
void recost_job_collectives(ReplayOutcome& o, const ReplayKnobs& knobs,
                            const std::vector<std::string>& overrides) {
  ReplayProgram& rp = o.imported;
  const JobClusters job =
      job_clusters(rp, o.source_gpu, knobs.source_gpus_per_node, knobs.dp_scale, overrides);
  o.job_ranks = job.ranks;
  o.job_ranks_to = job.ranks_to;
  o.job_from = job.from;
  o.job_to = job.to;
  RecostRequest rc;
  rc.from = o.job_from;
  rc.to = o.job_to;
  rc.params = core::comm_params_for(o.scenario);
  rc.world = job.ranks;
  rc.dp_scale = knobs.dp_scale;
  const std::vector<ExplainRow> rows = recost_collectives(rp, rc);
  // The collectives' rows replace the GPU what-if's (which keeps them as measured).
  o.explain.erase(
      std::remove_if(o.explain.begin(), o.explain.end(),
                     [](const ExplainRow& r) { return r.cls == KernelClass::kCollective; }),
      o.explain.end());
  for (const ExplainRow& r : rows) {
    o.explain.push_back(r);
    (r.rule.rfind("not re-costable", 0) == 0 ? o.collectives_fixed : o.collectives_recosted) +=
        static_cast<int>(r.count);
  }
  std::stable_sort(
      o.explain.begin(), o.explain.end(),
      [](const ExplainRow& a, const ExplainRow& b) { return a.measured_ns > b.measured_ns; });
}

}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!fs::is_directory(in, ec)) {
      files.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(in, ec)) {
      const std::string p = e.path().string();
      if (e.is_regular_file() && (ends_with(p, ".json") || ends_with(p, ".json.gz")))
        found.push_back(p);
    }
    std::sort(found.begin(), found.end());
    if (found.empty())
      throw InputError(in, "", "no *.json or *.json.gz trace in this folder",
                       "name the trace files, one per rank, or a folder holding them");
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty())
    throw InputError("(command line)", "TRACE", "no trace given",
                     "simrun replay TRACE.json[.gz]... or a folder of them");
  return files;
}

ReplayProgram import_traces(const std::vector<std::string>& files, bool hold_unexplained) {
  std::vector<SortedTrace> sorted;
  for (const std::string& f : files) sorted.push_back(sort_trace(tokenize_file(f)));
  return build_replay_program(std::move(sorted), hold_unexplained);
}

std::string catalog_gpu_of(const std::string& device_name) {
  const std::string& n = device_name;
  auto has = [&](const char* w) { return n.find(w) != std::string::npos; };
  if (has("A100")) return has("80GB") ? "A100-SXM4-80GB" : "A100-SXM4-40GB";  // PG509-200: 40 GB
  if (has("H100")) return has("PCIe") ? "H100-PCIe-80GB" : "H100-SXM5-80GB";
  if (has("H200")) return "H200-SXM-141GB";
  if (has("V100")) return has("32GB") ? "V100-SXM2-32GB" : "V100-SXM2-16GB";
  for (const char* prefix : {"NVIDIA ", "Tesla ", ""}) {
    const std::string p = prefix;
    if (n.rfind(p, 0) != 0) continue;
    if (const core::GpuCatalogEntry* e = core::find_gpu(n.substr(p.size()))) return e->gpu.name;
  }
  return {};
}

ReplayOutcome replay(const ReplayRequest& rq) {
  ReplayOutcome o;
  ReplayKnobs knobs;
  const std::vector<std::string> overrides = split_sets(rq.sets, &knobs);
  o.imported = import_traces(expand_inputs(rq.inputs), knobs.hold_unexplained);
  ReplayProgram& rp = o.imported;
  // The traces' GPU: replay.source_gpu, else the first trace's deviceProperties.
  o.source_gpu = knobs.source_gpu;
  if (o.source_gpu.empty()) {
    for (const ImportedRank& r : rp.ranks)
      if (o.source_gpu.empty()) o.source_gpu = catalog_gpu_of(r.meta.gpu_name);
  }
  if (o.source_gpu.empty()) {
    o.source_gpu = "A100-SXM4-80GB";
    for (ImportedRank& r : rp.ranks) r.stats.add(Stat::gpu_guessed);
    rp.stats.add(Stat::gpu_guessed, static_cast<std::int64_t>(rp.ranks.size()));
  }
  if (core::find_gpu(o.source_gpu) == nullptr)
    throw InputError("(command line)", "--set replay.source_gpu",
                     "unknown GPU '" + o.source_gpu + "'", core::gpu_name_hint(o.source_gpu));
  // The scenario gives the hardware only (the Program is ready): the traces' GPUs on one node,
  // the measured launch latency, cores enough for every recorded thread.
  std::vector<TimeNs> lat;
  for (const ImportedRank& r : rp.ranks) lat.push_back(r.launch_latency_ns);
  std::sort(lat.begin(), lat.end());
  const int n = rp.program.world_gpus;
  const nlohmann::json doc = {
      {"name", "replay"},
      {"cluster", {{"nodes", 1}, {"gpus_per_node", n}, {"gpu", o.source_gpu}}},
      {"model",
       {{"name", "replayed trace"},
        {"layers", {{{"type", "linear"}, {"name", "fc"}, {"in", 8}, {"out", 8}}}}}},
      {"training",
       {{"global_batch", n},
        {"precision", "fp32"},
        {"optimizer", "sgd"},
        {"steps", std::max(1, rp.program.steps)}}},
      {"strategy", {{"kind", n == 1 ? "single" : "ddp"}}},
      {"host",
       {{"cpu_cores", 1024},
        {"launch_latency_us", static_cast<double>(lat[lat.size() / 2]) / 1000.0}}}};
  // cluster.nodes and cluster.gpus_per_node place the job's ranks (below); the run's own cluster
  // is the traces' GPUs on one node.
  // cluster=FILE gives the run its GPU, before the other keys (cluster.gpu still wins).
  auto placement = [](const std::string& s) {
    return s.rfind("cluster.nodes=", 0) == 0 || s.rfind("cluster.gpus_per_node=", 0) == 0 ||
           s.rfind("cluster=", 0) == 0;
  };
  std::vector<std::string> run_sets;
  if (const std::string file = cluster_file_of(overrides); !file.empty())
    run_sets.push_back("cluster.gpu=" + core::parse_cluster_file(file).gpu.name);
  for (const std::string& s : overrides)
    if (!placement(s)) run_sets.push_back(s);
  o.scenario = run::load_scenario_document(doc, "replay", run_sets);
  o.target_gpu = o.scenario.cluster.gpu.name;
  // What-ifs (docs/replay.md, "What-ifs").
  if (o.target_gpu != o.source_gpu)
    o.explain = apply_gpu_whatif(rp, core::find_gpu(o.source_gpu)->gpu, o.scenario.cluster.gpu);
  recost_job_collectives(o, knobs, overrides);
  for (core::ProcessDesc& pd : rp.program.processes) pd.has_gil = o.scenario.host.gil;
  for (core::Op& op : rp.program.ops) {
    if (op.kind != core::OpKind::kHostWork) continue;
    op.python_ns =
        static_cast<TimeNs>(std::llround(static_cast<double>(op.python_ns) * knobs.python_scale));
    op.dispatch_ns = static_cast<TimeNs>(
        std::llround(static_cast<double>(op.dispatch_ns) * knobs.dispatch_scale));
  }
  const std::string problem = core::validate_program(rp.program);
  CSIM_ASSERT_MSG(problem.empty(), ("replayed Program invalid: " + problem).c_str());

  run::RunRequest req;
  req.scenario = &o.scenario;
  req.program = &rp.program;
  req.backend = rq.backend;
  req.trace = rq.trace;
  req.format_trace = rq.trace && rq.backend == run::Backend::kSim;
  o.run = run::run(req);
  const std::vector<core::OpTiming>& t = o.run.result.timings;
  for (const ImportedRank& r : rp.ranks) {
    for (const StepRecord& s : r.steps) {
      if (s.begin == core::kNoOp || s.end == core::kNoOp) continue;
      o.steps.push_back({r.gpu, s.name, s.measured_ns,
                         t[static_cast<std::size_t>(s.end)].end_ns -
                             t[static_cast<std::size_t>(s.begin)].start_ns});
    }
    for (const StreamRecord& s : r.streams)
      o.streams.push_back({r.gpu, rp.program.streams[static_cast<std::size_t>(s.stream)].name,
                           s.measured_busy_ns, 0});
  }
  for (const ImportedRank& r : rp.ranks) {
    if (r.measured_peak_bytes < 0) continue;
    MemoryResult m{r.gpu, r.measured_peak_bytes, 0};
    for (const core::GpuMemory& g : o.run.memory.gpus)
      if (g.gpu == r.gpu) m.replayed_peak_bytes = g.peak_bytes;
    o.memory.push_back(m);
  }
  for (const GpuOpInfo& k : rp.gpu_ops) {
    const core::Op& op = rp.program.ops[static_cast<std::size_t>(k.op)];
    const core::OpTiming& x = t[static_cast<std::size_t>(k.op)];
    for (StreamResult& s : o.streams)
      if (s.gpu == op.gpu && s.name == rp.program.streams[static_cast<std::size_t>(op.stream)].name)
        s.replayed_busy_ns += x.end_ns - x.start_ns;
  }
  return o;
}

double mean_step_error(const std::vector<StepResult>& steps) {
  double sum = 0;
  int n = 0;
  for (const StepResult& s : steps) {
    if (s.measured_ns <= 0) continue;
    sum += std::fabs(static_cast<double>(s.replayed_ns - s.measured_ns)) /
           static_cast<double>(s.measured_ns);
    ++n;
  }
  return n > 0 ? sum / n : 0.0;
}

void print_replay(const ReplayOutcome& o, std::ostream& out, bool explain) {
  const ReplayProgram& rp = o.imported;
  out << "replay: " << rp.ranks.size() << " trace" << (rp.ranks.size() == 1 ? "" : "s") << " on "
      << o.source_gpu;
  if (o.target_gpu != o.source_gpu) out << ", replayed on " << o.target_gpu;
  out << " (" << rp.program.ops.size() << " ops)\n";
  for (const ImportedRank& r : rp.ranks) {
    out << "rank " << r.gpu << ": " << r.meta.file;
    if (r.meta.rank >= 0) out << " (rank " << r.meta.rank << " of " << r.meta.world_size << ")";
    out << "\n";
  }
  auto ms = [](TimeNs ns) { return static_cast<double>(ns) / 1e6; };
  out << std::fixed << std::setprecision(3);
  out << "steps (ms):  rank  step                 measured   replayed     error\n";
  for (const StepResult& s : o.steps) {
    const double err = s.measured_ns > 0
                           ? 100.0 * static_cast<double>(s.replayed_ns - s.measured_ns) /
                                 static_cast<double>(s.measured_ns)
                           : 0.0;
    out << "             " << std::setw(4) << s.gpu << "  " << std::left << std::setw(18) << s.name
        << std::right << std::setw(11) << ms(s.measured_ns) << std::setw(11) << ms(s.replayed_ns)
        << " " << std::setw(8) << std::setprecision(2) << err << " %" << std::setprecision(3)
        << "\n";
  }
  out << "mean |error| over steps: " << std::setprecision(2) << 100.0 * mean_step_error(o.steps)
      << " %\n"
      << std::setprecision(3);
  out << "stream busy (ms): rank  stream        measured   replayed\n";
  for (const StreamResult& s : o.streams)
    out << "                  " << std::setw(4) << s.gpu << "  " << std::left << std::setw(12)
        << s.name << std::right << std::setw(10) << ms(s.measured_busy_ns) << std::setw(11)
        << ms(s.replayed_busy_ns) << "\n";
  for (const MemoryResult& m : o.memory)
    out << "memory (GiB):     " << std::setw(4) << m.gpu << "  peak allocated  " << std::setw(10)
        << static_cast<double>(m.measured_peak_bytes) / (1u << 30) << std::setw(11)
        << static_cast<double>(m.replayed_peak_bytes) / (1u << 30) << "\n";
  out << std::defaultfloat;
  if (o.collectives_recosted + o.collectives_fixed > 0) {
    auto cluster = [](int ranks, const core::ClusterSpec& c) {
      return std::to_string(ranks) + " ranks on " + std::to_string(c.nodes) + " x " +
             std::to_string(c.gpus_per_node) + " " + c.gpu.name;
    };
    out << "collectives: " << o.collectives_recosted << " re-costed from "
        << cluster(o.job_ranks, o.job_from) << " to " << cluster(o.job_ranks_to, o.job_to) << ", "
        << o.collectives_fixed << " not re-costable (measured)\n";
  }
  out << "import stats:\n";
  rp.stats.print(out);
  if (explain && !o.explain.empty()) print_explain(o.explain, out, 40);
}

}  // namespace csim::replay
