// Trial metric curves (docs/hpo.md, "Curves"). The simulator predicts time, not accuracy: a trial's
// metric after r iterations is either scripted (a JSON file, for tests and for users who have real
// curves) or synthetic and seeded, and the output says which.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace csim::hpo {

// metric(trial, r): the trial's metric after r >= 1 iterations; lower is better.
using CurveFn = std::function<double(int trial, std::int64_t iterations)>;

// Synthetic power-law curve, one per trial (docs/hpo.md, "Synthetic curves"):
//   loss(r) = a + b * r^(-c),  a ~ U[0.05, 0.5), b ~ U[0.5, 2.0), c ~ U[0.2, 1.0)
// drawn from std::mt19937_64(seed + 0x9E3779B97F4A7C15 * (trial + 1)), u = (x >> 11) * 2^-53.
struct SyntheticCurve {
  double a = 0, b = 0, c = 0;
  double at(std::int64_t iterations) const;
};
SyntheticCurve synthetic_curve(std::uint64_t seed, int trial);
CurveFn synthetic_curves(std::uint64_t seed);

// Scripted curves: {"mode": "min"|"max", "trials": [[m(1), m(2), ...], ...]}; trials[i][r-1] is
// trial i's metric after r iterations. With "max" the values are negated inside (higher is
// better), so the schedulers always minimise. Throws InputError (file, JSON path, hint) when a
// curve is missing for one of `trials` trials or shorter than `max_t`.
struct ScriptedCurves {
  std::vector<std::vector<double>> values;  // as minimised (negated when mode is max)
  bool maximise = false;                    // the file's mode
  CurveFn fn() const;
};
ScriptedCurves read_scripted_curves(const std::string& path, int trials, std::int64_t max_t);
ScriptedCurves parse_scripted_curves(const std::string& json_text, const std::string& name,
                                     int trials, std::int64_t max_t);

}  // namespace csim::hpo
