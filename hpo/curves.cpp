// Scripted and synthetic trial curves (curves.hpp; docs/hpo.md, "Curves").
#include "hpo/curves.hpp"

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace csim::hpo {
namespace {

// A double in [0, 1) from the engine's top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution, whose algorithm the standard leaves open.
double unit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

double SyntheticCurve::at(std::int64_t iterations) const {
  return a + b * std::pow(static_cast<double>(iterations < 1 ? 1 : iterations), -c);
}

SyntheticCurve synthetic_curve(std::uint64_t seed, int trial) {
  std::mt19937_64 rng(seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(trial + 1));
  SyntheticCurve s;
  s.a = 0.05 + 0.45 * unit(rng);
  s.b = 0.5 + 1.5 * unit(rng);
  s.c = 0.2 + 0.8 * unit(rng);
  return s;
}

CurveFn synthetic_curves(std::uint64_t seed) {
  return [seed](int trial, std::int64_t r) { return synthetic_curve(seed, trial).at(r); };
}

CurveFn ScriptedCurves::fn() const {
  return [v = values](int trial, std::int64_t r) {
    return v[static_cast<std::size_t>(trial)][static_cast<std::size_t>(r - 1)];
  };
}

ScriptedCurves parse_scripted_curves(const std::string& json_text, const std::string& name,
                                     int trials, std::int64_t max_t) {
  core::check_json_depth(json_text, name);  // docs/limits.md, "JSON nesting"
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(name, "", std::string("not JSON: ") + e.what(),
                     "expected {\"mode\": \"min\", \"trials\": [[m1, m2, ...], ...]}");
  }
  ScriptedCurves c;
  if (!doc.is_object() || !doc.contains("trials") || !doc["trials"].is_array())
    throw InputError(name, "trials", "missing array of per-trial curves",
                     "expected {\"mode\": \"min\", \"trials\": [[m1, m2, ...], ...]}");
  if (doc.contains("mode")) {
    if (doc["mode"] == "max")
      c.maximise = true;
    else if (doc["mode"] != "min")
      throw InputError(name, "mode", "must be \"min\" or \"max\"", "lower or higher is better");
  }
  const auto& list = doc["trials"];
  if (static_cast<int>(list.size()) < trials)
    throw InputError(
        name, "trials",
        "has " + std::to_string(list.size()) + " curves for " + std::to_string(trials) + " trials",
        "give one curve per trial, or lower --trials");
  for (std::size_t i = 0; i < static_cast<std::size_t>(trials); ++i) {
    const std::string path = "trials[" + std::to_string(i) + "]";
    if (!list[i].is_array() || static_cast<std::int64_t>(list[i].size()) < max_t)
      throw InputError(name, path, "needs at least max_t = " + std::to_string(max_t) + " numbers",
                       "the metric after 1, 2, ..., max_t iterations");
    std::vector<double> v;
    for (std::size_t r = 0; r < list[i].size(); ++r) {
      if (!list[i][r].is_number())
        throw InputError(name, path + "[" + std::to_string(r) + "]", "not a number", "");
      const double m = list[i][r].get<double>();
      v.push_back(c.maximise ? -m : m);
    }
    c.values.push_back(std::move(v));
  }
  return c;
}

ScriptedCurves read_scripted_curves(const std::string& path, int trials, std::int64_t max_t) {
  return parse_scripted_curves(
      core::read_text_file(path, "curves file",
                           "check the --curves path (docs/hpo.md, \"Curves\")"),
      path, trials, max_t);
}

}  // namespace csim::hpo
