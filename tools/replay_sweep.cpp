// simrun sweep over a replayed trace (docs/replay.md, "Sweeping a replay").
#include "tools/replay_sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "replay/replay_run.hpp"
#include "sweep/variant_space.hpp"

namespace csim::app {
namespace {

struct Row {
  std::vector<std::string> values;
  bool ok = false;
  std::string error;
  double step_ms = 0;  // mean replayed step over the steps of every rank
  double busy_ms = 0;  // GPU busy: the streams' replayed busy time, summed
  int recosted = 0, fixed = 0;
};

double mean_step_ms(const replay::ReplayOutcome& o) {
  double sum = 0;
  for (const replay::StepResult& s : o.steps) sum += static_cast<double>(s.replayed_ns);
  return o.steps.empty() ? 0.0 : sum / static_cast<double>(o.steps.size()) / 1e6;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

bool is_trace_source(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return true;
  auto ends = [&](const std::string& e) {
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".json.gz")) return true;
  if (!ends(".json")) return false;
  std::ifstream f(path, std::ios::binary);
  std::string head(64 * 1024, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(f.gcount()));
  return head.find("\"traceEvents\"") != std::string::npos;
}

int replay_sweep(const ReplaySweepArgs& a, std::ostream& out, std::ostream& err) {
  std::vector<sweep::Knob> knobs;
  for (const std::string& g : a.grid) knobs.push_back(sweep::parse_knob(g));
  const std::vector<sweep::Variant> variants =
      a.random_n > 0 ? sweep::random_variants(knobs, a.random_n, a.seed)
                     : sweep::grid_variants(knobs, a.max_variants);
  const auto t0 = std::chrono::steady_clock::now();
  // The base must replay: its own step is the reference of the "vs base" column.
  replay::ReplayRequest rq;
  rq.inputs = {a.source};
  rq.sets = a.base_sets;
  const double base_ms = mean_step_ms(replay::replay(rq));
  std::vector<Row> rows;
  for (const sweep::Variant& v : variants) {
    Row r;
    r.values = v.values;
    rq.sets = a.base_sets;
    for (const std::string& s : sweep::variant_sets(knobs, v)) rq.sets.push_back(s);
    try {
      const replay::ReplayOutcome o = replay::replay(rq);
      r.ok = true;
      r.step_ms = mean_step_ms(o);
      for (const replay::StreamResult& st : o.streams)
        r.busy_ms += static_cast<double>(st.replayed_busy_ns) / 1e6;
      r.recosted = o.collectives_recosted;
      r.fixed = o.collectives_fixed;
    } catch (const InputError& e) {
      r.error = e.what();
    }
    rows.push_back(std::move(r));
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    if (x.ok != y.ok) return x.ok;
    return x.step_ms < y.step_ms;
  });
  if (!a.results_path.empty()) {
    std::ofstream f(a.results_path);
    for (const sweep::Knob& k : knobs) f << csv_field(k.key) << ",";
    f << "status,step_time_s,vs_base,gpu_busy_s,collectives_recosted,collectives_not_recostable,"
         "error\n";
    for (const Row& r : rows) {
      for (const std::string& v : r.values) f << csv_field(v) << ",";
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s,%.9g,%.6g,%.9g,%d,%d,", r.ok ? "ok" : "invalid",
                    r.step_ms / 1e3, r.ok && base_ms > 0 ? r.step_ms / base_ms - 1 : 0.0,
                    r.busy_ms / 1e3, r.recosted, r.fixed);
      f << buf << csv_field(r.error) << "\n";
    }
    if (!f)
      throw InputError(a.results_path, "", "cannot write the results file",
                       "check the folder exists and is writable");
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "replay sweep of %s: base step %.3f ms (mean over steps)\n",
                a.source.c_str(), base_ms);
  const std::size_t shown = std::min(rows.size(), static_cast<std::size_t>(std::max(0, a.top)));
  std::vector<std::size_t> width;
  for (const sweep::Knob& k : knobs) width.push_back(k.key.size());
  for (std::size_t i = 0; i < shown; ++i)
    for (std::size_t k = 0; k < knobs.size(); ++k)
      width[k] = std::max(width[k], rows[i].values[k].size());
  out << buf << "  #   ";
  for (std::size_t k = 0; k < knobs.size(); ++k) {
    std::string c = knobs[k].key;
    c.resize(width[k], ' ');
    out << c << "  ";
  }
  out << "status    step (ms)   vs base   GPU busy (ms)   collectives re-costed / not\n";
  for (std::size_t i = 0; i < shown; ++i) {
    const Row& r = rows[i];
    std::snprintf(buf, sizeof buf, "  %-3zu ", i + 1);
    out << buf;
    for (std::size_t k = 0; k < knobs.size(); ++k) {
      std::string v = r.values[k];
      v.resize(width[k], ' ');
      out << v << "  ";
    }
    if (r.ok)
      std::snprintf(buf, sizeof buf, "ok      %10.3f  %+7.2f %%  %13.3f   %d / %d\n", r.step_ms,
                    base_ms > 0 ? 100.0 * (r.step_ms / base_ms - 1) : 0.0, r.busy_ms, r.recosted,
                    r.fixed);
    else
      std::snprintf(buf, sizeof buf, "invalid  %.180s\n", r.error.c_str());
    out << buf;
  }
  std::snprintf(buf, sizeof buf, "%zu variants replayed in %.2f s (one at a time)\n", rows.size(),
                wall_s);
  out << buf;
  (void)err;
  return 0;
}

}  // namespace csim::app
