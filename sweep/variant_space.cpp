// docs/sweep.md, "Variants".
#include "sweep/variant_space.hpp"

#include <algorithm>
#include <random>
#include <unordered_set>

#include "core/error.hpp"

namespace csim::sweep {

Knob parse_knob(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("--grid", text, "expected KEY=V1,V2,...",
                     "e.g. --grid strategy.kind=data_parallel,ddp");
  Knob k;
  k.key = text.substr(0, eq);
  std::string cur;
  int depth = 0;
  bool quoted = false;
  for (std::size_t i = eq + 1; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '"' && (i == 0 || text[i - 1] != '\\')) quoted = !quoted;
    if (!quoted && (c == '[' || c == '{')) ++depth;
    if (!quoted && (c == ']' || c == '}')) --depth;
    if (c == ',' && depth <= 0 && !quoted) {
      if (cur.empty())
        throw InputError("--grid", k.key, "an empty value in '" + text + "'",
                         "separate values with single commas: KEY=V1,V2");
      k.values.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return k;
}

std::size_t grid_size(const std::vector<Knob>& knobs) {
  std::size_t n = 1;
  for (const Knob& k : knobs) {
    if (k.values.empty()) return 0;
    if (n > SIZE_MAX / k.values.size()) return SIZE_MAX;
    n *= k.values.size();
  }
  return n;
}

namespace {

// Mixed-radix decoding of a grid index, first knob slowest.
std::vector<std::string> values_at(const std::vector<Knob>& knobs, std::size_t index) {
  std::vector<std::string> v(knobs.size());
  for (std::size_t k = knobs.size(); k-- > 0;) {
    const std::size_t r = knobs[k].values.size();
    v[k] = knobs[k].values[index % r];
    index /= r;
  }
  return v;
}

}  // namespace

std::vector<Variant> grid_variants(const std::vector<Knob>& knobs, std::size_t limit) {
  const std::size_t n = grid_size(knobs);
  if (n > limit)
    throw InputError("--grid", "",
                     "the grid has " + std::to_string(n) + " variants, more than the limit " +
                         std::to_string(limit),
                     "sample it with --random N, or raise --max-variants");
  std::vector<Variant> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = {i, values_at(knobs, i)};
  return out;
}

std::vector<Variant> random_variants(const std::vector<Knob>& knobs, std::size_t n,
                                     std::uint64_t seed) {
  const std::size_t total = grid_size(knobs);
  if (n >= total) return grid_variants(knobs, total);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, total - 1);
  std::unordered_set<std::size_t> seen;
  std::vector<Variant> out;
  out.reserve(n);
  while (out.size() < n) {
    const std::size_t i = pick(rng);
    if (seen.insert(i).second) out.push_back({i, values_at(knobs, i)});
  }
  return out;
}

std::vector<std::string> variant_sets(const std::vector<Knob>& knobs, const Variant& v) {
  std::vector<std::string> sets;
  sets.reserve(knobs.size());
  for (std::size_t k = 0; k < knobs.size(); ++k) sets.push_back(knobs[k].key + "=" + v.values[k]);
  return sets;
}

std::string variant_id(const std::vector<Knob>& knobs, const std::vector<std::string>& values) {
  std::string id;
  for (std::size_t k = 0; k < knobs.size() && k < values.size(); ++k) {
    if (k) id += ' ';
    id += knobs[k].key + "=" + values[k];
  }
  return id;
}

}  // namespace csim::sweep
