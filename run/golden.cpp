#include "run/golden.hpp"

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"
#include "run/scenario_loader.hpp"

namespace csim::run {

std::vector<GoldenCase> read_golden_list(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw InputError(path, "", "cannot open the golden list", "run from the repository root");
  std::vector<GoldenCase> cases;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    GoldenCase c;
    std::string sets;
    if (!(ss >> c.golden >> c.scenario >> sets)) {
      throw InputError(path, "line " + std::to_string(line_no),
                       "expected: golden scenario overrides", "use - for no overrides");
    }
    if (sets != "-") {
      std::stringstream parts(sets);
      for (std::string part; std::getline(parts, part, ',');) c.overrides.push_back(part);
    }
    c.full_trace = c.golden.find(".trace.json") != std::string::npos;
    std::string flag;
    if (ss >> flag) {
      if (flag != "large")
        throw InputError(path, "line " + std::to_string(line_no), "unknown flag '" + flag + "'",
                         "the optional 4th column is: large");
      c.large = true;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string render_golden(const GoldenCase& c, const std::string& scenarios_dir) {
  core::Scenario s = load_scenario(scenarios_dir + "/" + c.scenario, {}, c.overrides);
  s.file = "scenarios/" + c.scenario;  // independent of where the repository is checked out
  const RunResult run = simulate(s);
  std::ostringstream out;
  if (c.full_trace) {
    prof::write_chrome_trace(run.trace, out);
  } else {
    out << prof::summary_to_json(prof::summarize(run.trace)).dump(2) << "\n";
  }
  return out.str();
}

}  // namespace csim::run
