// Search space parsing and sampling (search_space.hpp; docs/hpo.md, "Search space").
#include "hpo/search_space.hpp"

#include <random>

#include "core/error.hpp"

namespace csim::hpo {

Knob parse_knob(const std::string& text, const std::string& option) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("(command line)", option + " " + text, "expected KEY=V1,V2,...",
                     "e.g. " + option + " training.global_batch=256,512");
  Knob k;
  k.key = text.substr(0, eq);
  const std::string list = text.substr(eq + 1);
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = list.find(',', begin);
    const std::string v =
        list.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (v.empty())
      throw InputError("(command line)", option + " " + text, "empty value in the list",
                       "separate values with single commas: KEY=V1,V2");
    for (const std::string& seen : k.values)
      if (seen == v)
        throw InputError("(command line)", option + " " + text, "value '" + v + "' given twice",
                         "list each value once");
    k.values.push_back(v);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return k;
}

std::vector<Assignment> sample_trials(const std::vector<Knob>& knobs, int trials, Sampler sampler,
                                      std::uint64_t seed) {
  std::vector<Assignment> out;
  out.reserve(static_cast<std::size_t>(trials > 0 ? trials : 0));
  std::mt19937_64 rng(seed);
  for (int t = 0; t < trials; ++t) {
    Assignment a;
    if (sampler == Sampler::kGrid) {
      // Mixed-radix digits of the grid index, last knob least significant.
      std::vector<std::size_t> digit(knobs.size());
      std::size_t rest = static_cast<std::size_t>(t);
      std::size_t size = 1;
      for (const Knob& k : knobs) size *= k.values.size();
      rest %= size;
      for (std::size_t i = knobs.size(); i-- > 0;) {
        digit[i] = rest % knobs[i].values.size();
        rest /= knobs[i].values.size();
      }
      for (std::size_t i = 0; i < knobs.size(); ++i)
        a.emplace_back(knobs[i].key, knobs[i].values[digit[i]]);
    } else {
      for (const Knob& k : knobs)
        a.emplace_back(k.key, k.values[static_cast<std::size_t>(rng() % k.values.size())]);
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<std::string> scenario_overrides(const Assignment& a) {
  std::vector<std::string> sets;
  const std::string prefix = kParamPrefix;
  for (const auto& [key, value] : a)
    if (key.rfind(prefix, 0) != 0) sets.push_back(key + "=" + value);
  return sets;
}

std::string describe(const Assignment& a) {
  std::string s;
  for (const auto& [key, value] : a) s += (s.empty() ? "" : " ") + key + "=" + value;
  return s;
}

}  // namespace csim::hpo
