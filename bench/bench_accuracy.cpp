// The accuracy dashboard and its regression gate (docs/accuracy.md is this program's output):
// every row of calibration/published/published-measurements.json, -modern.json (calibration:
// constants may be fitted to them) and development-set.json (never fitted; checked) next to what
// the simulator predicts for the published setup, per row and per family.
//
//   bench_accuracy                           markdown: rows, families, totals
//   bench_accuracy --gate BASELINE           exit 1 when a row regressed (CTest accuracy:gate)
//   bench_accuracy --write-baseline FILE [--why ID=TEXT]...   rewrite the baseline
//   bench_accuracy --json FILE               the rows as JSON as well
//   --cases / --modern / --development FILE  other case files
//
// How each category is predicted: bench/accuracy/collectives.cpp (collective, host overhead) and
// bench/accuracy/runs.cpp (every simulated row, from calibration/scenarios/<id>.json).
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench/accuracy/accuracy.hpp"
#include "profiler/atomic_file.hpp"

namespace {

using namespace csim::accuracy;
using nlohmann::json;

struct FamilyStats {
  int rows = 0, predicted = 0, within = 0;
  double sum_abs = 0, max_abs = 0, sum_signed = 0;
};

void print_markdown(const std::vector<Row>& rows) {
  std::cout << "| case | set | family | published | predicted | error | how predicted | status |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  std::map<std::string, FamilyStats> fam;
  std::vector<std::string> order;
  for (const Row& r : rows) {
    std::cout << "| " << r.id << " | " << r.set << " | " << r.family << " | " << r.published
              << " | " << r.predicted << " | " << r.error << " | " << r.how << " | " << r.status
              << " |\n";
    if (!fam.count(r.family)) order.push_back(r.family);
    FamilyStats& f = fam[r.family];
    ++f.rows;
    if (std::isnan(r.abs_error)) continue;
    ++f.predicted;
    f.within += r.abs_error <= kTolerance;
    f.sum_abs += r.abs_error;
    f.max_abs = std::max(f.max_abs, r.abs_error);
    f.sum_signed += r.signed_error;
  }
  std::cout << "\n| family | rows | predicted | within 10 % | mean abs error | max abs error | "
               "mean signed error |\n| --- | --- | --- | --- | --- | --- | --- |\n";
  FamilyStats all;
  for (const std::string& name : order) {
    const FamilyStats& f = fam[name];
    auto mean = [&](double s) { return f.predicted ? fmt(100 * s / f.predicted, 1) + " %" : "—"; };
    std::cout << "| " << name << " | " << f.rows << " | " << f.predicted << " | " << f.within
              << " | " << mean(f.sum_abs) << " | "
              << (f.predicted ? fmt(100 * f.max_abs, 1) + " %" : "—") << " | "
              << (f.predicted ? pct(f.sum_signed / f.predicted) : "—") << " |\n";
    all.rows += f.rows, all.predicted += f.predicted, all.within += f.within;
    all.sum_abs += f.sum_abs, all.sum_signed += f.sum_signed;
    all.max_abs = std::max(all.max_abs, f.max_abs);
  }
  std::cout << "\nRows: " << all.rows << " (" <<
      [&] {
        int cal = 0;
        for (const Row& r : rows) cal += r.set == "calibration";
        return std::to_string(cal) + " calibration, " + std::to_string(all.rows - cal) +
               " development";
      }()
            << "); predicted: " << all.predicted << "; within 10 %: " << all.within
            << ". Mean abs error " << fmt(100 * all.sum_abs / std::max(all.predicted, 1), 1)
            << " %, max " << fmt(100 * all.max_abs, 1) << " %.\nNot predicted:";
  bool any = false;
  for (const Row& r : rows)
    if (std::isnan(r.abs_error)) std::cout << (any ? "; " : " ") << r.id, any = true;
  std::cout << (any ? ".\n" : " none.\n");
}

json rows_json(const std::vector<Row>& rows) {
  json a = json::array();
  for (const Row& r : rows)
    a.push_back(
        {{"id", r.id},
         {"set", r.set},
         {"family", r.family},
         {"published", r.published},
         {"predicted", r.predicted},
         {"signed_error", std::isnan(r.signed_error) ? json(nullptr) : json(r.signed_error)},
         {"abs_error", std::isnan(r.abs_error) ? json(nullptr) : json(r.abs_error)},
         {"how", r.how},
         {"status", r.status}});
  return a;
}

bool read_json(const std::string& path, json& out) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "bench_accuracy: " << path << ": cannot read the file\n";
    return false;
  }
  out = json::parse(in, nullptr, false);
  if (out.is_discarded()) {
    std::cerr << "bench_accuracy: " << path << ": not JSON\n";
    return false;
  }
  return true;
}

// Through the project's atomic writer (profiler/atomic_file.hpp): no half-written file on failure.
bool write_text(const std::string& path, const std::string& text) {
  try {
    csim::prof::write_file_atomically(path, [&](std::ostream& out) { out << text; });
    return true;
  } catch (const std::exception& e) {
    std::cerr << "bench_accuracy: " << e.what() << "\n";
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<CaseFile> files = default_case_files();
  std::string gate, write_baseline, json_out;
  std::vector<std::pair<std::string, std::string>> why;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::cout << "usage: bench_accuracy [--gate BASELINE | --write-baseline FILE [--why ID=TEXT]"
                   "...] [--json FILE] [--cases F] [--modern F] [--development F]\n";
      return 0;
    }
    if (!has_value) {
      std::cerr << "bench_accuracy: " << a << ": unknown option or missing value (hint: --help)\n";
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--cases")
      files[0].path = v;
    else if (a == "--modern")
      files[1].path = v;
    else if (a == "--development")
      files[2].path = v;
    else if (a == "--gate")
      gate = v;
    else if (a == "--write-baseline")
      write_baseline = v;
    else if (a == "--json")
      json_out = v;
    else if (a == "--why" && v.find('=') != std::string::npos)
      why.emplace_back(v.substr(0, v.find('=')), v.substr(v.find('=') + 1));
    else {
      std::cerr << "bench_accuracy: " << a << " " << v << ": unknown option (hint: --help)\n";
      return 2;
    }
  }
  // Output paths first, before a minute of simulation (profiler/atomic_file.hpp).
  try {
    if (!json_out.empty()) csim::prof::check_output_file("--json", json_out);
    if (!write_baseline.empty()) csim::prof::check_output_file("--write-baseline", write_baseline);
  } catch (const std::exception& e) {
    std::cerr << "bench_accuracy: " << e.what() << "\n";
    return 2;
  }
  std::vector<Row> rows;
  try {
    rows = evaluate(files);
  } catch (const std::exception& e) {
    std::cerr << "bench_accuracy: " << e.what() << "\n";
    return 2;
  }
  if (!json_out.empty() && !write_text(json_out, rows_json(rows).dump(1) + "\n")) return 2;
  if (!write_baseline.empty()) {
    json old = json::object();
    if (std::ifstream(write_baseline) && !read_json(write_baseline, old)) return 2;
    try {
      const json b = make_baseline(rows, old, why);
      if (!write_text(write_baseline, baseline_text(b))) return 2;
    } catch (const std::invalid_argument& e) {
      std::cerr << "bench_accuracy: " << write_baseline << ": " << e.what() << "\n";
      return 2;
    }
    std::cout << "bench_accuracy: wrote " << write_baseline << " (" << rows.size() << " rows)\n";
    return 0;
  }
  if (!gate.empty()) {
    json baseline;
    if (!read_json(gate, baseline)) return 2;
    const GateResult g = check_against_baseline(rows, baseline);
    for (const std::string& f : g.failures) std::cout << "accuracy gate: FAIL " << f << "\n";
    std::cout << "accuracy gate: " << g.rows_checked << " rows checked against " << gate << ", "
              << g.failures.size() << " failed (a row fails when its absolute error grows by more "
              << "than " << fmt(kGateSlackPct, 0) << " point)\n";
    return g.failures.empty() ? 0 : 1;
  }
  print_markdown(rows);
  return 0;
}
