// Hyper-parameter search space (docs/hpo.md, "Search space"): knobs given as KEY=V1,V2,... and
// the trials drawn from them, by grid or by a seeded random sampler. Pure data: no simulator here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace csim::hpo {

// Keys with this prefix are hyper-parameters the simulator does not see (a learning rate): they
// label trials but never reach the scenario, so they do not change a trial's step time.
inline constexpr const char* kParamPrefix = "param.";

struct Knob {
  std::string key;                  // scenario dotted path (as simrun --set), or param.NAME
  std::vector<std::string> values;  // as written; read as JSON by the scenario parser
};

// One trial's knob values, in the order the knobs were given.
using Assignment = std::vector<std::pair<std::string, std::string>>;

enum class Sampler { kGrid, kRandom };

// Parses "KEY=V1,V2,...". Throws InputError naming `option` and the text when it is malformed
// (no '=', empty key, an empty value, a repeated value).
Knob parse_knob(const std::string& text, const std::string& option = "--space");

// The trials, in trial-id order.
//  kGrid:   trial i takes grid point i mod |grid|; the grid is the Cartesian product with the last
//           knob varying fastest (nested loops in the order given).
//  kRandom: every knob of every trial draws index = u mod |values| from one std::mt19937_64
//           seeded with `seed`, in trial then knob order (deterministic across platforms: the
//           engine's output is specified by the standard, and no std distribution is used).
std::vector<Assignment> sample_trials(const std::vector<Knob>& knobs, int trials, Sampler sampler,
                                      std::uint64_t seed);

// "--set" strings of the scenario knobs of `a` (param.* knobs left out).
std::vector<std::string> scenario_overrides(const Assignment& a);

// "k1=v1 k2=v2", for tables and trace args.
std::string describe(const Assignment& a);

}  // namespace csim::hpo
